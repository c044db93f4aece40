`include "vta_params.vh"
// Compute module: LOAD UOP/ACC/ACC_8BIT (memory clients uop and acc), GEMM, ALU and FINISH.
// Owns the write ports of the uop and accumulator buffers and the read ports GEMM/ALU use.
module vta_compute (
  input  wire        clk,
  input  wire        rst,
  input  wire        en,
  input  wire [31:0] cyc,
  input  wire        head_valid,
  input  wire [`VTA_INSN_BITS+31:0] head,
  input  wire        tok_prev_ok,   // l2g > 0
  input  wire        tok_next_ok,   // s2g > 0
  output wire        deq,
  output wire        pop_prev, pop_next, push_prev, push_next,
  // memory clients: uop (1) and acc (4)
  output wire        uop_req,
  output wire [31:0] uop_req_addr,
  output wire [8:0]  uop_req_beats,
  input  wire        uop_grant, uop_cmpl_next, uop_beat,
  output wire        acc_req,
  output wire [31:0] acc_req_addr,
  output wire [8:0]  acc_req_beats,
  input  wire        acc_grant, acc_cmpl_next, acc_beat,
  input  wire [`VTA_BUS_BITS-1:0] rd_data,
  // buffers
  output wire [`VTA_SLOTS_UOP-1:0] uop_we,
  output wire [`VTA_SLOTS_UOP*`VTA_LOG_UOP_DEPTH-1:0] uop_wa,
  output wire [`VTA_SLOTS_UOP*`VTA_UOP_ELEM_BITS-1:0] uop_wd,
  output wire [`VTA_LOG_UOP_DEPTH-1:0] uop_ra,
  input  wire [`VTA_UOP_ELEM_BITS-1:0] uop_rd,
  output wire [`VTA_ACC_NW-1:0] acc_we,
  output wire [`VTA_ACC_NW*`VTA_LOG_ACC_DEPTH-1:0] acc_wa,
  output wire [`VTA_ACC_NW*`VTA_ACC_ELEM_BITS-1:0] acc_wd,
  output wire [2*`VTA_LOG_ACC_DEPTH-1:0] acc_ra,
  input  wire [2*`VTA_ACC_ELEM_BITS-1:0] acc_rd,
  output wire [`VTA_LOG_INP_DEPTH-1:0] inp_ra,
  input  wire [`VTA_INP_ELEM_BITS-1:0] inp_rd,
  output wire [`VTA_LOG_WGT_DEPTH-1:0] wgt_ra,
  input  wire [`VTA_WGT_ELEM_BITS-1:0] wgt_rd,
  // retire
  output wire        busy,
  output wire        ret_valid,
  output wire [31:0] ret_midx, ret_pidx, ret_start, ret_digest,
  output wire [`VTA_HDR_OPCODE_W-1:0] ret_op
);
  localparam integer AAW = `VTA_LOG_ACC_DEPTH;
  localparam integer AEB = `VTA_ACC_ELEM_BITS;
  localparam integer NSA = `VTA_SLOTS_ACC;
  localparam integer NS8 = `VTA_SLOTS_ACC8;

  wire [`VTA_INSN_BITS-1:0] insn = head[`VTA_INSN_BITS-1:0];
  wire [`VTA_HDR_OPCODE_W-1:0] op = insn[`VTA_HDR_OPCODE_LSB +: `VTA_HDR_OPCODE_W];
  wire [`VTA_MEM_MEMORY_TYPE_W-1:0] mt = insn[`VTA_MEM_MEMORY_TYPE_LSB +: `VTA_MEM_MEMORY_TYPE_W];
  wire        xs_zero = insn[`VTA_MEM_X_SIZE_LSB +: `VTA_MEM_X_SIZE_W] == {`VTA_MEM_X_SIZE_W{1'b0}};
  wire [`VTA_GEMM_UOP_END_W-1:0] ubgn = {1'b0, insn[`VTA_GEMM_UOP_BGN_LSB +: `VTA_GEMM_UOP_BGN_W]};
  wire [`VTA_GEMM_UOP_END_W-1:0] uend = insn[`VTA_GEMM_UOP_END_LSB +: `VTA_GEMM_UOP_END_W];
  wire        empty_loop
    = (insn[`VTA_GEMM_ITER_OUT_LSB +: `VTA_GEMM_ITER_OUT_W] == {`VTA_GEMM_ITER_OUT_W{1'b0}})
      || (insn[`VTA_GEMM_ITER_IN_LSB +: `VTA_GEMM_ITER_IN_W] == {`VTA_GEMM_ITER_IN_W{1'b0}})
      || (uend <= ubgn);
  wire        is_tensor = (op == `VTA_OP_GEMM) || (op == `VTA_OP_ALU);
  wire        head_nop = (op == `VTA_OP_LOAD) ? xs_zero : (is_tensor ? empty_loop : 1'b1);

  wire start, go;
  wire u_fin, a_fin, a8_fin, t_fin;
  wire [31:0] u_dig, a_dig, a8_dig, t_dig;
  reg  [1:0]  unit;                 // 0 uop, 1 acc, 2 acc8, 3 tensor
  wire [31:0] unit_digest = (unit == 2'd0) ? u_dig : (unit == 2'd1) ? a_dig : (unit == 2'd2) ? a8_dig : t_dig;
  wire [1:0]  head_unit = is_tensor ? 2'd3 : (mt == `VTA_MEM_UOP) ? 2'd0 : (mt == `VTA_MEM_ACC) ? 2'd1 : 2'd2;
  always @(posedge clk) begin
    if (rst) unit <= 2'd0;
    else if (go) unit <= head_unit;
  end

  vta_ctrl #(.USE_PREV(1), .USE_NEXT(1)) u_ctrl (
    .clk(clk), .rst(rst), .en(en), .cyc(cyc), .head_valid(head_valid), .head_hdr(insn[`VTA_HDR_BITS-1:0]),
    .head_pidx(head[`VTA_INSN_BITS +: 32]), .head_nop(head_nop), .tok_prev_ok(tok_prev_ok),
    .tok_next_ok(tok_next_ok), .unit_fin(u_fin || a_fin || a8_fin || t_fin),
    .unit_digest(unit_digest), .start(start), .go(go), .pop_prev(pop_prev), .pop_next(pop_next),
    .push_prev(push_prev), .push_next(push_next), .busy(busy), .ret_valid(ret_valid),
    .ret_midx(ret_midx), .ret_pidx(ret_pidx), .ret_op(ret_op), .ret_start(ret_start),
    .ret_digest(ret_digest));
  assign deq = start;

  wire go_u  = go && head_unit == 2'd0;
  wire go_a  = go && head_unit == 2'd1;
  wire go_a8 = go && head_unit == 2'd2;
  wire go_t  = go && head_unit == 2'd3;

  vta_loader #(.EBD(`VTA_UOP_ELEM_BITS), .EBS(`VTA_UOP_ELEM_BITS), .AW(`VTA_LOG_UOP_DEPTH), .SEXT(0),
               .LEB(`VTA_LOG_UOP_ELEM_BYTES), .NS(`VTA_SLOTS_UOP)) u_uop (
    .clk(clk), .rst(rst), .go(go_u), .insn(insn), .req(uop_req), .req_addr(uop_req_addr),
    .req_beats(uop_req_beats), .grant(uop_grant), .cmpl_next(uop_cmpl_next), .beat(uop_beat),
    .rd_data(rd_data), .we(uop_we), .wa(uop_wa), .wd(uop_wd), .fin(u_fin), .digest(u_dig));

  // ACC and ACC_8BIT share the acc client; only the started one requests.
  wire        a_req, a8_req;
  wire [31:0] a_addr, a8_addr;
  wire [8:0]  a_beats, a8_beats;
  wire [NSA-1:0] a_we;
  wire [NSA*AAW-1:0] a_wa;
  wire [NSA*AEB-1:0] a_wd;
  wire [NS8-1:0] a8_we;
  wire [NS8*AAW-1:0] a8_wa;
  wire [NS8*AEB-1:0] a8_wd;
  vta_loader #(.EBD(AEB), .EBS(AEB), .AW(AAW), .SEXT(0), .LEB(`VTA_LOG_ACC_ELEM_BYTES),
               .NS(NSA)) u_acc (
    .clk(clk), .rst(rst), .go(go_a), .insn(insn), .req(a_req), .req_addr(a_addr), .req_beats(a_beats),
    .grant(acc_grant && unit == 2'd1), .cmpl_next(acc_cmpl_next && unit == 2'd1),
    .beat(acc_beat && unit == 2'd1), .rd_data(rd_data), .we(a_we), .wa(a_wa), .wd(a_wd),
    .fin(a_fin), .digest(a_dig));
  vta_loader #(.EBD(`VTA_ACC8_ELEM_BITS), .EBS(AEB), .AW(AAW), .SEXT(1),
               .LEB(`VTA_LOG_ACC8_ELEM_BYTES), .NS(NS8)) u_acc8 (
    .clk(clk), .rst(rst), .go(go_a8), .insn(insn), .req(a8_req), .req_addr(a8_addr),
    .req_beats(a8_beats), .grant(acc_grant && unit == 2'd2),
    .cmpl_next(acc_cmpl_next && unit == 2'd2), .beat(acc_beat && unit == 2'd2), .rd_data(rd_data),
    .we(a8_we), .wa(a8_wa), .wd(a8_wd), .fin(a8_fin), .digest(a8_dig));
  assign acc_req       = a_req || a8_req;
  assign acc_req_addr  = a_req ? a_addr : a8_addr;
  assign acc_req_beats = a_req ? a_beats : a8_beats;

  wire          t_we;
  wire [AAW-1:0] t_wa;
  wire [AEB-1:0] t_wd;
  vta_tensor u_tensor (
    .clk(clk), .rst(rst), .go(go_t), .insn(insn), .uop_ra(uop_ra), .uop_rd(uop_rd),
    .acc_ra_dst(acc_ra[0 +: AAW]), .acc_ra_src(acc_ra[AAW +: AAW]),
    .acc_rd_dst(acc_rd[0 +: AEB]), .acc_rd_src(acc_rd[AEB +: AEB]),
    .inp_ra(inp_ra), .inp_rd(inp_rd), .wgt_ra(wgt_ra), .wgt_rd(wgt_rd),
    .acc_we(t_we), .acc_wa(t_wa), .acc_wd(t_wd), .fin(t_fin), .digest(t_dig));

  // accumulator write slots: [tensor, acc loader slots, acc8 loader slots]
  assign acc_we = {a8_we, a_we, t_we};
  assign acc_wa = {a8_wa, a_wa, t_wa};
  assign acc_wd = {a8_wd, a_wd, t_wd};
endmodule
