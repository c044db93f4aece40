// The single memory port of docs/timing.md section 4.2: fixed-priority arbiter (client 0 highest)
// and one burst in service.  A burst granted at g with n beats moves its beats at g+L .. g+L+n-1
// and completes at c = g+L+n; `cmpl_next` tells the owner in cycle c-1 so that the owner's
// registered request for its next burst is visible exactly at c, when the port is free again.
// The DRAM itself (tb_top) is a plain word array: combinational read, write at the clock edge.
module vta_mem_port #(
  parameter NC   = 6,     // clients
  parameter BUS  = 64,    // bus bits
  parameter LAT  = 16,    // DRAM_LATENCY
  parameter WRC  = 5      // the one client that writes (store)
) (
  input  wire              clk,
  input  wire              rst,
  input  wire              en,
  input  wire [NC-1:0]     req,
  input  wire [NC*32-1:0]  req_addr,    // bus-word address of the burst
  input  wire [NC*9-1:0]   req_beats,   // 1 .. BURST_BEATS
  output reg  [NC-1:0]     grant,
  output wire [NC-1:0]     cmpl_next,   // the owner's burst completes next cycle
  output wire [NC-1:0]     beat,        // a beat of the owner's burst moves this cycle
  // DRAM side
  output wire [31:0]       mem_addr,
  output wire              mem_wr,
  input  wire [BUS-1:0]    wr_data_in,  // from the writing client, during its beats
  input  wire [BUS/8-1:0]  wr_strb_in,
  output wire [BUS-1:0]    mem_wdata,
  output wire [BUS/8-1:0]  mem_wstrb,
  output wire              busy_o
);
  localparam [11:0] LAT12 = LAT;
  reg         busy;
  reg [11:0]  rem;      // cycles until completion (c - t) while busy
  reg [8:0]   nbeats;
  reg [31:0]  baddr;
  reg [NC-1:0] owner;   // one-hot

  integer k;
  reg         found;
  always @* begin
    grant = {NC{1'b0}};
    found = 1'b0;
    for (k = 0; k < NC; k = k + 1)
      if (!found && req[k] && !busy && en) begin
        grant[k] = 1'b1;
        found = 1'b1;
      end
  end

  reg [31:0] g_addr;
  reg [8:0]  g_beats;
  always @* begin
    g_addr = 32'd0;
    g_beats = 9'd0;
    for (k = 0; k < NC; k = k + 1)
      if (grant[k]) begin
        g_addr = req_addr[k*32 +: 32];
        g_beats = req_beats[k*9 +: 9];
      end
  end

  wire       in_beat = busy && ({3'b0, nbeats} >= rem);
  wire [8:0] beat_idx = nbeats - rem[8:0];
  assign beat      = in_beat ? owner : {NC{1'b0}};
  assign cmpl_next = (busy && rem == 12'd1) ? owner : {NC{1'b0}};
  assign mem_addr  = baddr + {23'd0, beat_idx};
  assign mem_wr    = in_beat && owner[WRC] && en;
  assign mem_wdata = wr_data_in;
  assign mem_wstrb = wr_strb_in;
  assign busy_o    = busy;

  always @(posedge clk) begin
    if (rst) begin
      busy <= 1'b0;
      rem <= 12'd0;
      nbeats <= 9'd0;
      baddr <= 32'd0;
      owner <= {NC{1'b0}};
    end else if (found) begin
      busy <= 1'b1;
      rem <= LAT12 + {3'd0, g_beats} - 12'd1;
      nbeats <= g_beats;
      baddr <= g_addr;
      owner <= grant;
    end else if (busy) begin
      rem <= rem - 12'd1;
      if (rem == 12'd1) busy <= 1'b0;
    end
  end
endmodule
