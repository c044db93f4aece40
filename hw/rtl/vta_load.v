`include "vta_params.vh"
// Load module: LOAD INP (client 2) and LOAD WGT (client 3) with zero padding; uses only the
// pop_next (g2l) and push_next (l2g) tokens.
module vta_load (
  input  wire        clk,
  input  wire        rst,
  input  wire        en,
  input  wire [31:0] cyc,
  input  wire        head_valid,
  input  wire [`VTA_INSN_BITS+31:0] head,
  input  wire        tok_next_ok,     // g2l > 0
  output wire        deq,
  output wire        pop_next,
  output wire        push_next,
  output wire        inp_req,
  output wire [31:0] inp_req_addr,
  output wire [8:0]  inp_req_beats,
  input  wire        inp_grant, inp_cmpl_next, inp_beat,
  output wire        wgt_req,
  output wire [31:0] wgt_req_addr,
  output wire [8:0]  wgt_req_beats,
  input  wire        wgt_grant, wgt_cmpl_next, wgt_beat,
  input  wire [`VTA_BUS_BITS-1:0] rd_data,
  output wire [`VTA_SLOTS_INP-1:0] inp_we,
  output wire [`VTA_SLOTS_INP*`VTA_LOG_INP_DEPTH-1:0] inp_wa,
  output wire [`VTA_SLOTS_INP*`VTA_INP_ELEM_BITS-1:0] inp_wd,
  output wire [`VTA_SLOTS_WGT-1:0] wgt_we,
  output wire [`VTA_SLOTS_WGT*`VTA_LOG_WGT_DEPTH-1:0] wgt_wa,
  output wire [`VTA_SLOTS_WGT*`VTA_WGT_ELEM_BITS-1:0] wgt_wd,
  output wire        busy,
  output wire        ret_valid,
  output wire [31:0] ret_midx, ret_pidx, ret_start, ret_digest,
  output wire [`VTA_HDR_OPCODE_W-1:0] ret_op
);
  wire [`VTA_INSN_BITS-1:0] insn = head[`VTA_INSN_BITS-1:0];
  wire head_wgt = insn[`VTA_MEM_MEMORY_TYPE_LSB +: `VTA_MEM_MEMORY_TYPE_W] == `VTA_MEM_WGT;
  wire head_nop = insn[`VTA_MEM_X_SIZE_LSB +: `VTA_MEM_X_SIZE_W] == {`VTA_MEM_X_SIZE_W{1'b0}};
  wire start, go, i_fin, w_fin;
  wire [31:0] i_dig, w_dig;
  reg  is_wgt;
  wire pop_prev_unused, push_prev_unused;
  always @(posedge clk) begin
    if (rst) is_wgt <= 1'b0;
    else if (go) is_wgt <= head_wgt;
  end

  vta_ctrl #(.USE_PREV(0), .USE_NEXT(1)) u_ctrl (
    .clk(clk), .rst(rst), .en(en), .cyc(cyc), .head_valid(head_valid), .head_hdr(insn[`VTA_HDR_BITS-1:0]),
    .head_pidx(head[`VTA_INSN_BITS +: 32]), .head_nop(head_nop), .tok_prev_ok(1'b0),
    .tok_next_ok(tok_next_ok), .unit_fin(i_fin || w_fin), .unit_digest(is_wgt ? w_dig : i_dig),
    .start(start), .go(go), .pop_prev(pop_prev_unused), .pop_next(pop_next),
    .push_prev(push_prev_unused), .push_next(push_next), .busy(busy), .ret_valid(ret_valid),
    .ret_midx(ret_midx), .ret_pidx(ret_pidx), .ret_op(ret_op), .ret_start(ret_start),
    .ret_digest(ret_digest));
  assign deq = start;

  vta_loader #(.EBD(`VTA_INP_ELEM_BITS), .EBS(`VTA_INP_ELEM_BITS), .AW(`VTA_LOG_INP_DEPTH), .SEXT(0),
               .LEB(`VTA_LOG_INP_ELEM_BYTES), .NS(`VTA_SLOTS_INP)) u_inp (
    .clk(clk), .rst(rst), .go(go && !head_wgt), .insn(insn), .req(inp_req), .req_addr(inp_req_addr),
    .req_beats(inp_req_beats), .grant(inp_grant), .cmpl_next(inp_cmpl_next), .beat(inp_beat),
    .rd_data(rd_data), .we(inp_we), .wa(inp_wa), .wd(inp_wd), .fin(i_fin), .digest(i_dig));
  vta_loader #(.EBD(`VTA_WGT_ELEM_BITS), .EBS(`VTA_WGT_ELEM_BITS), .AW(`VTA_LOG_WGT_DEPTH), .SEXT(0),
               .LEB(`VTA_LOG_WGT_ELEM_BYTES), .NS(`VTA_SLOTS_WGT)) u_wgt (
    .clk(clk), .rst(rst), .go(go && head_wgt), .insn(insn), .req(wgt_req), .req_addr(wgt_req_addr),
    .req_beats(wgt_req_beats), .grant(wgt_grant), .cmpl_next(wgt_cmpl_next), .beat(wgt_beat),
    .rd_data(rd_data), .we(wgt_we), .wa(wgt_wa), .wd(wgt_wd), .fin(w_fin), .digest(w_dig));
endmodule
