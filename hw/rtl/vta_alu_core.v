`include "vta_params.vh"
// One ALU micro-op on every accumulator lane (hardware spec 3.5, fsim semantics).  The shift
// amount y is a signed 32-bit value: y >= 32 gives x >>> 31, y <= -32 gives 0, and -31..31 shift
// right (y >= 0, arithmetic) or left (y < 0) as fsim does.  One case arm per row of hw/alu.py, each
// on the opcode define the header generator emits for it (rows the config's HW_VER lacks have no
// define and no arm); vta_fetch rejects every other opcode (VTA_ALU_LEGAL_MASK), so none reaches here.
/* verilator tracing_off */
module vta_alu_core (
  input  wire                             en,       // an ALU uop issues: otherwise skip the lanes
  input  wire [`VTA_ALU_ALU_OPCODE_W-1:0] op,
  input  wire                             use_imm,
  input  wire [`VTA_ALU_IMM_W-1:0]       imm,
  input  wire [`VTA_ACC_ELEM_BITS-1:0]    dst_in,
  input  wire [`VTA_ACC_ELEM_BITS-1:0]    src_in,
  output reg  [`VTA_ACC_ELEM_BITS-1:0]    out
);
  localparam integer LANES = `VTA_BATCH * `VTA_BLOCK_OUT;
  localparam integer W = `VTA_ACC_WIDTH;       // accumulator lane bits
  localparam integer LW = `VTA_LOG_ACC_WIDTH;
  localparam signed [W-1:0] ZERO = {W{1'b0}};
  integer l;
  reg signed [W-1:0] x, y, r;
  reg [LW-1:0] sh;
  always @* begin
    out = dst_in;
    x = ZERO;
    y = ZERO;
    r = ZERO;
    sh = {LW{1'b0}};
    if (en) for (l = 0; l < LANES; l = l + 1) begin
      x = dst_in[l*W +: W];
      r = x;                              // no arm for a code outside the table: vta_fetch stops first
      y = use_imm ? {{(W-`VTA_ALU_IMM_W){imm[`VTA_ALU_IMM_W-1]}}, imm} : src_in[l*W +: W];
      sh = {LW{1'b0}} - y[LW-1:0];        // -y for -(W-1) <= y < 0
      case (op)
        `VTA_ALU_MIN: r = (x < y) ? x : y;
        `VTA_ALU_MAX: r = (x > y) ? x : y;
        `VTA_ALU_ADD: r = x + y;
        `VTA_ALU_SHR: begin
          if (y >= W) r = x >>> (W-1);
          else if (y <= -W) r = ZERO;
          else if (y >= 0) r = x >>> y[LW-1:0];
          else r = x <<< sh;
        end
`ifdef VTA_ALU_MUL
        `VTA_ALU_MUL: r = x * y;
`endif
      endcase
      out[l*W +: W] = r;
    end
  end
endmodule
