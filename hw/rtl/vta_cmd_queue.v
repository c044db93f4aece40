`include "vta_params.vh"
// Command queue (docs/timing.md 3): occupancy is a register, so an instruction enqueued in cycle d
// is visible to its module from d+1 and room is judged on the occupancy at the start of the cycle.
module vta_cmd_queue (
  input  wire        clk,
  input  wire        rst,
  input  wire        enq,
  input  wire [`VTA_INSN_BITS+31:0] enq_data,
  input  wire        deq,
  output wire        full,
  output wire        valid,
  output wire [`VTA_INSN_BITS+31:0] head,
  output reg  [`VTA_LOG_CMD_QUEUE_DEPTH:0] count
);
  localparam integer LD = `VTA_LOG_CMD_QUEUE_DEPTH;
  localparam integer DEPTH = `VTA_CMD_QUEUE_DEPTH;
  localparam integer DW = `VTA_INSN_BITS + 32;
  localparam integer PW = (LD > 0) ? LD : 1;
  localparam [PW-1:0] LAST = {PW{1'b1}} >> (PW - LD);   // DEPTH - 1
  reg [DW-1:0] mem [0:DEPTH-1];
  reg [PW-1:0] rp, wp;

  assign full  = count[LD];             // count == DEPTH = 2^LD
  assign valid = (count != {(LD+1){1'b0}});
  assign head  = mem[rp];

  always @(posedge clk) begin
    if (rst) begin
      rp <= {PW{1'b0}};
      wp <= {PW{1'b0}};
      count <= {(LD+1){1'b0}};
    end else begin
      if (enq) begin
        mem[wp] <= enq_data;
        wp <= (wp == LAST) ? {PW{1'b0}} : wp + 1'b1;
      end
      if (deq) rp <= (rp == LAST) ? {PW{1'b0}} : rp + 1'b1;
      if (enq && !deq) count <= count + 1'b1;
      else if (deq && !enq) count <= count - 1'b1;
    end
  end
endmodule
