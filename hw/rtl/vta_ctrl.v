`include "vta_params.vh"
// Instruction control shared by the load, compute and store modules (docs/timing.md 5 and 6):
// an idle module starts its visible queue head in the first cycle its tokens are available,
// pops the tokens at the start cycle s, pushes at the end cycle e, and is idle again from e+1.
// Instructions flagged `head_nop` (NOP, FINISH, empty GEMM/ALU loops) end at s+1 with digest 0.
module vta_ctrl #(
  parameter USE_PREV = 1,
  parameter USE_NEXT = 1
) (
  input  wire        clk,
  input  wire        rst,
  input  wire        en,
  input  wire [31:0] cyc,
  input  wire        head_valid,
  input  wire [`VTA_HDR_BITS-1:0] head_hdr,       // opcode and dependency flags of the queue head
  input  wire [31:0] head_pidx,
  input  wire        head_nop,
  input  wire        tok_prev_ok,
  input  wire        tok_next_ok,
  input  wire        unit_fin,
  input  wire [31:0] unit_digest,
  output wire        start,
  output wire        go,
  output wire        pop_prev,
  output wire        pop_next,
  output wire        push_prev,
  output wire        push_next,
  output reg         busy,
  output wire        ret_valid,
  output reg  [31:0] ret_midx,
  output reg  [31:0] ret_pidx,
  output reg  [`VTA_HDR_OPCODE_W-1:0] ret_op,
  output reg  [31:0] ret_start,
  output wire [31:0] ret_digest
);
  wire h_pop_prev = (USE_PREV != 0) && head_hdr[`VTA_HDR_POP_PREV_LSB];
  wire h_pop_next = (USE_NEXT != 0) && head_hdr[`VTA_HDR_POP_NEXT_LSB];
  wire tok_ok = (!h_pop_prev || tok_prev_ok) && (!h_pop_next || tok_next_ok);

  assign start    = en && !busy && head_valid && tok_ok;
  assign go       = start && !head_nop;
  assign pop_prev = start && h_pop_prev;
  assign pop_next = start && h_pop_next;

  reg nop_pend, r_push_prev, r_push_next;
  assign ret_valid  = busy && (nop_pend || unit_fin);
  assign ret_digest = nop_pend ? 32'd0 : unit_digest;
  assign push_prev  = ret_valid && r_push_prev;
  assign push_next  = ret_valid && r_push_next;

  always @(posedge clk) begin
    if (rst) begin
      busy <= 1'b0;
      nop_pend <= 1'b0;
      r_push_prev <= 1'b0;
      r_push_next <= 1'b0;
      ret_midx <= 32'd0;
      ret_pidx <= 32'd0;
      ret_op <= {`VTA_HDR_OPCODE_W{1'b0}};
      ret_start <= 32'd0;
    end else if (start) begin
      busy <= 1'b1;
      nop_pend <= head_nop;
      r_push_prev <= (USE_PREV != 0) && head_hdr[`VTA_HDR_PUSH_PREV_LSB];
      r_push_next <= (USE_NEXT != 0) && head_hdr[`VTA_HDR_PUSH_NEXT_LSB];
      ret_pidx <= head_pidx;
      ret_op <= head_hdr[`VTA_HDR_OPCODE_LSB +: `VTA_HDR_OPCODE_W];
      ret_start <= cyc;
    end else if (ret_valid) begin
      busy <= 1'b0;
      nop_pend <= 1'b0;
      ret_midx <= ret_midx + 32'd1;
    end
  end
endmodule
