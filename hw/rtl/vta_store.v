`include "vta_params.vh"
// Store module (docs/timing.md 6): STORE of y_size rows of x_size OUT elements, row r read from
// accumulator elements sram_base + r*x_size + x, narrowed by truncation to OUT_WIDTH bits per lane
// (hardware spec 3.3) and written through client 5; first request at s+1, ends when the last
// burst completes (y_size = 0: at s+1).  Uses only pop_prev (g2s) and push_prev (s2g).
module vta_store (
  input  wire        clk,
  input  wire        rst,
  input  wire        en,
  input  wire [31:0] cyc,
  input  wire        head_valid,
  input  wire [`VTA_INSN_BITS+31:0] head,
  input  wire        tok_prev_ok,     // g2s > 0
  output wire        deq,
  output wire        pop_prev,
  output wire        push_prev,
  output wire        req,
  output wire [31:0] req_addr,
  output wire [8:0]  req_beats,
  input  wire        grant, cmpl_next, beat,
  input  wire [31:0] beat_addr,       // bus-word address of the current beat
  output reg  [`VTA_BUS_BITS-1:0]   wr_data,
  output reg  [`VTA_BUS_BITS/8-1:0] wr_strb,
  output wire [`VTA_SLOTS_OUT*`VTA_LOG_ACC_DEPTH-1:0] acc_ra,
  input  wire [`VTA_SLOTS_OUT*`VTA_ACC_ELEM_BITS-1:0] acc_rd,
  output wire        busy,
  output wire        ret_valid,
  output wire [31:0] ret_midx, ret_pidx, ret_start, ret_digest,
  output wire [`VTA_HDR_OPCODE_W-1:0] ret_op
);
  localparam integer BUS = `VTA_BUS_BITS;
  localparam integer LB = `VTA_LOG_BUS_BYTES;
  localparam integer OEB = `VTA_OUT_ELEM_BITS;
  localparam integer AEB = `VTA_ACC_ELEM_BITS;
  localparam integer AAW = `VTA_LOG_ACC_DEPTH;
  localparam integer NS = `VTA_SLOTS_OUT;
  localparam integer LANES = `VTA_BATCH * `VTA_BLOCK_OUT;
  localparam integer OW = `VTA_OUT_WIDTH;
  localparam integer LOE = `VTA_LOG_OUT_ELEM_BYTES;

  /* verilator lint_off UNUSEDSIGNAL */
  wire [`VTA_INSN_BITS-1:0] insn = head[`VTA_INSN_BITS-1:0];   // a STORE uses its memory fields
  /* verilator lint_on UNUSEDSIGNAL */
  localparam integer SBW = `VTA_MEM_SRAM_BASE_W;
  localparam integer YW  = `VTA_MEM_Y_SIZE_W;
  localparam integer XW  = `VTA_MEM_X_SIZE_W;
  localparam integer XSW = `VTA_MEM_X_STRIDE_W;
  localparam integer AW  = `VTA_ACC_WIDTH;   // accumulator lane bits
  wire [SBW-1:0] f_sram  = insn[`VTA_MEM_SRAM_BASE_LSB +: SBW];
  wire [31:0]    f_dram  = insn[`VTA_MEM_DRAM_BASE_LSB +: `VTA_MEM_DRAM_BASE_W];
  wire [YW-1:0]  f_ysize = insn[`VTA_MEM_Y_SIZE_LSB +: YW];
  wire [XW-1:0]  f_xsize = insn[`VTA_MEM_X_SIZE_LSB +: XW];
  wire [XSW-1:0] f_xstr  = insn[`VTA_MEM_X_STRIDE_LSB +: XSW];
  wire head_nop = (f_xsize == {XW{1'b0}});

  wire start, go, pop_next_unused, push_next_unused;
  reg  fin_reg;
  reg  [31:0] digest, r_sram, r_xsize;
  wire seq_done;
  vta_ctrl #(.USE_PREV(1), .USE_NEXT(0)) u_ctrl (
    .clk(clk), .rst(rst), .en(en), .cyc(cyc), .head_valid(head_valid), .head_hdr(insn[`VTA_HDR_BITS-1:0]),
    .head_pidx(head[`VTA_INSN_BITS +: 32]), .head_nop(head_nop), .tok_prev_ok(tok_prev_ok),
    .tok_next_ok(1'b0), .unit_fin(fin_reg || seq_done), .unit_digest(digest), .start(start),
    .go(go), .pop_prev(pop_prev), .pop_next(pop_next_unused), .push_prev(push_prev),
    .push_next(push_next_unused), .busy(busy), .ret_valid(ret_valid), .ret_midx(ret_midx),
    .ret_pidx(ret_pidx), .ret_op(ret_op), .ret_start(ret_start), .ret_digest(ret_digest));
  assign deq = start;

  wire [31:0] beat_j;
  wire [LB-1:0] row_off;
  wire [YW-1:0] row;
  vta_dma_seq #(.LB(LB), .LK(`VTA_LOG_BURST_BEATS)) u_seq (
    .clk(clk), .rst(rst), .start(go && f_ysize != {YW{1'b0}}), .base(f_dram << LOE),
    .row_bytes({{(32-XW){1'b0}}, f_xsize} << LOE),
    .stride({{(32-XSW){1'b0}}, f_xstr} << LOE), .nrows(f_ysize),
    .req(req), .req_addr(req_addr), .req_beats(req_beats), .grant(grant), .cmpl_next(cmpl_next),
    .beat(beat), .beat_j(beat_j), .row(row), .row_off(row_off), .done(seq_done));

  wire [31:0] row_base = r_sram + {{(32-YW){1'b0}}, row} * r_xsize;

  // acc element -> OUT element: keep the low OUT_WIDTH bits of every lane
  function [OEB-1:0] narrow;
    input [AEB-1:0] acc;
    integer l;
    begin
      for (l = 0; l < LANES; l = l + 1) narrow[l*OW +: OW] = acc[l*AW +: OW];
    end
  endfunction

  genvar g;
  generate
    if (OEB > BUS) begin : g_wide
      localparam integer PB = OEB / BUS;
      wire [31:0] part = beat_j % PB;
      /* verilator lint_off UNUSEDSIGNAL */
      wire [31:0] ra32 = row_base + beat_j / PB;     // wraps to the depth (see vta_tensor)
      /* verilator lint_on UNUSEDSIGNAL */
      wire [OEB-1:0] elem = narrow(acc_rd[AEB-1:0]);
      assign acc_ra = ra32[AAW-1:0];
      always @* begin
        wr_data = elem[part*BUS +: BUS];
        wr_strb = {(BUS/8){beat}};
      end
      wire unused_ok = &{1'b0, row_off};
    end else begin : g_narrow
      localparam integer Q = BUS / OEB;
      wire [31:0] off_el = {{(32-LB){1'b0}}, row_off} >> LOE;
      wire [NS-1:0] sv;
      for (g = 0; g < NS; g = g + 1) begin : g_slot
        wire [31:0] x = beat_j * Q + g - off_el;
        /* verilator lint_off UNUSEDSIGNAL */
        wire [31:0] ra32 = row_base + x;
        /* verilator lint_on UNUSEDSIGNAL */
        assign sv[g] = beat && !(beat_j == 32'd0 && g < off_el) && (x < r_xsize);
        assign acc_ra[g*AAW +: AAW] = ra32[AAW-1:0];
      end
      integer k;
      always @* begin
        for (k = 0; k < NS; k = k + 1) begin
          wr_data[k*OEB +: OEB] = narrow(acc_rd[k*AEB +: AEB]);
          wr_strb[k*(OEB/8) +: (OEB/8)] = {(OEB/8){sv[k]}};
        end
      end
    end
  endgenerate

  // digest: every 32-bit DRAM word written, x = byte address / 4
  wire [BUS/32-1:0] wmask;
  genvar w;
  generate
    for (w = 0; w < BUS/32; w = w + 1) begin : g_wm
      assign wmask[w] = wr_strb[w*4];
    end
  endgenerate
  wire [31:0] dsum;
  vta_digest #(.W(BUS)) u_dig (.idx(beat_addr), .data(wr_data), .mask(wmask), .sum(dsum));

  always @(posedge clk) begin
    if (rst) begin
      fin_reg <= 1'b0;
      digest <= 32'd0;
      r_sram <= 32'd0;
      r_xsize <= 32'd0;
    end else begin
      fin_reg <= go && f_ysize == {YW{1'b0}};
      if (go) begin
        digest <= 32'd0;
        r_sram <= {{(32-SBW){1'b0}}, f_sram};
        r_xsize <= {{(32-XW){1'b0}}, f_xsize};
      end else if (beat) begin
        digest <= digest + dsum;
      end
    end
  end
endmodule
