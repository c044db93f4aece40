// Write digest of docs/timing.md section 9 for one element write (or one DRAM beat):
// sum over its 32-bit words v_i of mix(idx*WPE + i, v_i), words with mask bit 0 left out.
/* verilator tracing_off */
module vta_digest #(
  parameter W = 32       // bits written (a multiple of 32)
) (
  input  wire [31:0]     idx,    // element index (beat word address for DRAM writes)
  input  wire [W-1:0]    data,
  input  wire [W/32-1:0] mask,
  output reg  [31:0]     sum
);
  localparam integer WPE = W / 32;
  localparam [31:0] WPE32 = WPE;
  localparam [31:0] GOLD = 32'h9E3779B1;
  localparam [31:0] MULT = 32'h85EBCA77;
  reg [31:0] x;
  integer i;
  always @* begin
    sum = 32'd0;
    x = 32'd0;
    if (mask != {WPE{1'b0}}) begin     // most cycles write nothing: skip the arithmetic
      for (i = 0; i < WPE; i = i + 1) begin
        x = idx * WPE32 + i[31:0];
        if (mask[i]) sum = sum + ((data[i*32 +: 32] ^ (x * GOLD)) * MULT);
      end
    end
  end
endmodule
