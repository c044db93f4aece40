`include "vta_params.vh"
// One LOAD engine (docs/timing.md section 6): started in cycle s, it writes the P zero pad elements
// one per cycle at s+1 .. s+P, then issues the y_size row transfers (first request at s+1+P) and
// ends in the cycle the last burst completes.  With y_size = 0 there is no data phase and the
// instruction ends at s+1+P.  Data elements land at sram_base + (y_pad_0+r)*xt + x_pad_0 + x.
module vta_loader #(
  parameter EBD  = 128,  // DRAM element bits
  parameter EBS  = 128,  // SRAM element bits (4*EBD for ACC_8BIT)
  parameter AW   = 11,   // SRAM address bits
  parameter SEXT = 0,    // 1: ACC_8BIT, sign-extend every DRAM byte into one SRAM lane
  parameter LEB  = 4,    // log2(DRAM element bytes)
  parameter NS   = 1     // element slots per beat
) (
  input  wire                   clk,
  input  wire                   rst,
  input  wire                   go,
  /* verilator lint_off UNUSEDSIGNAL */
  input  wire [`VTA_INSN_BITS-1:0] insn,    // the whole word; a LOAD uses its memory fields
  /* verilator lint_on UNUSEDSIGNAL */
  output wire                   req,
  output wire [31:0]            req_addr,
  output wire [8:0]             req_beats,
  input  wire                   grant,
  input  wire                   cmpl_next,
  input  wire                   beat,
  input  wire [`VTA_BUS_BITS-1:0] rd_data,
  output reg  [NS-1:0]          we,
  output reg  [NS*AW-1:0]       wa,
  output reg  [NS*EBS-1:0]      wd,
  output wire                   fin,
  output reg  [31:0]            digest
);
  localparam integer BUS = `VTA_BUS_BITS;
  localparam integer LB = `VTA_LOG_BUS_BYTES;
  localparam integer LANES = EBD / 8;
  localparam integer LW = EBS / LANES;   // SRAM lane bits when SEXT

  // ---- fields of the instruction being started ------------------------------------------
  localparam integer SBW = `VTA_MEM_SRAM_BASE_W;
  localparam integer YW  = `VTA_MEM_Y_SIZE_W;
  localparam integer XW  = `VTA_MEM_X_SIZE_W;
  localparam integer XSW = `VTA_MEM_X_STRIDE_W;
  localparam integer YP0W = `VTA_MEM_Y_PAD_0_W, YP1W = `VTA_MEM_Y_PAD_1_W;
  localparam integer XP0W = `VTA_MEM_X_PAD_0_W, XP1W = `VTA_MEM_X_PAD_1_W;
  localparam [YW-1:0] Y0 = {YW{1'b0}};
  localparam [YW-1:0] Y1 = {{(YW-1){1'b0}}, 1'b1};
  wire [SBW-1:0]  f_sram  = insn[`VTA_MEM_SRAM_BASE_LSB +: SBW];
  wire [31:0]     f_dram  = insn[`VTA_MEM_DRAM_BASE_LSB +: `VTA_MEM_DRAM_BASE_W];
  wire [YW-1:0]   f_ysize = insn[`VTA_MEM_Y_SIZE_LSB +: YW];
  wire [XW-1:0]   f_xsize = insn[`VTA_MEM_X_SIZE_LSB +: XW];
  wire [XSW-1:0]  f_xstr  = insn[`VTA_MEM_X_STRIDE_LSB +: XSW];
  wire [YP0W-1:0] f_yp0   = insn[`VTA_MEM_Y_PAD_0_LSB +: YP0W];
  wire [YP1W-1:0] f_yp1   = insn[`VTA_MEM_Y_PAD_1_LSB +: YP1W];
  wire [XP0W-1:0] f_xp0   = insn[`VTA_MEM_X_PAD_0_LSB +: XP0W];
  wire [XP1W-1:0] f_xp1   = insn[`VTA_MEM_X_PAD_1_LSB +: XP1W];
  // the same fields zero-extended to the 32-bit index arithmetic
  wire [31:0] e_xsize = {{(32-XW){1'b0}}, f_xsize};
  wire [31:0] e_yp0   = {{(32-YP0W){1'b0}}, f_yp0};
  wire [31:0] e_xp0   = {{(32-XP0W){1'b0}}, f_xp0};

  wire [31:0] g_xt    = e_xp0 + e_xsize + {{(32-XP1W){1'b0}}, f_xp1};
  wire [31:0] g_yt    = e_yp0 + {{(32-YW){1'b0}}, f_ysize} + {{(32-YP1W){1'b0}}, f_yp1};
  wire [63:0] g_total = {32'd0, g_xt} * {32'd0, g_yt};
  wire [63:0] g_data  = {{(64-XW){1'b0}}, f_xsize} * {{(64-YW){1'b0}}, f_ysize};
  wire [63:0] g_pads  = g_total - g_data;
  wire        g_side  = (f_xp0 != {XP0W{1'b0}}) || (f_xp1 != {XP1W{1'b0}});
  wire [31:0] g_ds0   = e_yp0 * g_xt + e_xp0;                          // first data element (relative)
  wire [31:0] g_rlen  = g_side ? e_xsize : g_data[31:0];              // one data run
  wire [YW-1:0] g_nruns = g_side ? f_ysize : {{(YW-1){1'b0}}, f_ysize != Y0};
  wire        g_skip0 = (g_ds0 == 32'd0) && (g_nruns != Y0);          // pads would start inside data

  // ---- latched state ----------------------------------------------------------------------
  localparam [1:0] ST_IDLE = 2'd0, ST_PAD = 2'd1, ST_DATA = 2'd2;
  reg [1:0]  state;
  reg [31:0] r_sram, r_dram, r_xt, r_rlen;
  reg [YW-1:0]   r_ysize;
  reg [XW-1:0]   r_xsize;
  reg [XSW-1:0]  r_xstr;
  reg [YP0W-1:0] r_yp0;
  reg [XP0W-1:0] r_xp0;
  reg [63:0] pad_rem;
  reg [31:0] pad_rel, nds;
  reg [YW-1:0]   runs_left;
  reg        fin_reg;

  // The data phase starts at go (no pads) or in the last pad cycle, from the fields of either.
  wire        seq_start_go  = go && (g_pads == 64'd0) && (f_ysize != Y0);
  wire        last_pad      = (state == ST_PAD) && (pad_rem == 64'd1);
  wire        seq_start_pad = last_pad && (r_ysize != Y0);
  wire [31:0] s_dram  = go ? f_dram : r_dram;
  wire [XW-1:0]  s_xsize = go ? f_xsize : r_xsize;
  wire [XSW-1:0] s_xstr  = go ? f_xstr : r_xstr;
  wire [YW-1:0]  s_ysize = go ? f_ysize : r_ysize;

  wire [31:0] beat_j;
  wire [LB-1:0] row_off;
  wire [YW-1:0] row;
  wire        seq_done;
  vta_dma_seq #(.LB(LB), .LK(`VTA_LOG_BURST_BEATS)) u_seq (
    .clk(clk), .rst(rst), .start(seq_start_go || seq_start_pad),
    .base(s_dram << LEB), .row_bytes({{(32-XW){1'b0}}, s_xsize} << LEB),
    .stride({{(32-XSW){1'b0}}, s_xstr} << LEB),
    .nrows(s_ysize), .req(req), .req_addr(req_addr), .req_beats(req_beats), .grant(grant),
    .cmpl_next(cmpl_next), .beat(beat), .beat_j(beat_j), .row(row), .row_off(row_off),
    .done(seq_done));

  wire [NS-1:0]     sv;
  wire [NS*32-1:0]  sx;
  wire [NS*EBD-1:0] sd;
  vta_unpack #(.EB(EBD), .BUS(BUS), .LB(LB), .NS(NS)) u_unpack (
    .clk(clk), .rst(rst), .beat(beat && state == ST_DATA), .data(rd_data), .beat_j(beat_j),
    .off(row_off), .nel({{(32-XW){1'b0}}, r_xsize}), .sv(sv), .sx(sx), .sd(sd));

  assign fin = fin_reg || seq_done;

  // ---- SRAM writes: one pad zero per cycle, or the data slots of this beat ----------------
  // Indices wrap to the buffer depth; out-of-range programs are rejected before they reach the
  // RTL (sim.program), and the digest uses the full index.
  wire [31:0] row_base = r_sram + ({{(32-YP0W){1'b0}}, r_yp0} + {{(32-YW){1'b0}}, row}) * r_xt
                       + {{(32-XP0W){1'b0}}, r_xp0};
  wire [31:0] pad_abs  = r_sram + pad_rel;
  wire [NS*32-1:0]  idx;     // element index of each slot this cycle
  wire [NS*EBS-1:0] data;    // SRAM element of each slot (sign-extended for ACC_8BIT)
  wire [NS*32-1:0]  dsum;
  genvar g, gl;
  generate
    for (g = 0; g < NS; g = g + 1) begin : g_slot
      assign idx[g*32 +: 32] = (state == ST_PAD) ? pad_abs : row_base + sx[g*32 +: 32];
      if (SEXT != 0) begin : g_sext
        for (gl = 0; gl < LANES; gl = gl + 1) begin : g_lane
          assign data[g*EBS + gl*LW +: LW] = {{(LW-8){sd[g*EBD + gl*8 + 7]}}, sd[g*EBD + gl*8 +: 8]};
        end
      end else begin : g_copy
        assign data[g*EBS +: EBS] = sd[g*EBD +: EBD];
      end
      always @* begin
        we[g] = (state == ST_PAD) ? (g == 0) : sv[g];
        wa[g*AW +: AW] = idx[g*32 +: AW];
        wd[g*EBS +: EBS] = data[g*EBS +: EBS];   // zero in ST_PAD (no beat reaches the unpacker)
      end
      vta_digest #(.W(EBS)) u_dig (.idx(idx[g*32 +: 32]), .data(wd[g*EBS +: EBS]),
                                   .mask({(EBS/32){we[g]}}), .sum(dsum[g*32 +: 32]));
    end
  endgenerate
  integer s;
  reg [31:0] cyc_sum;
  always @* begin
    cyc_sum = 32'd0;
    for (s = 0; s < NS; s = s + 1) cyc_sum = cyc_sum + dsum[s*32 +: 32];
  end

  wire [31:0] pad_nxt = pad_rel + 32'd1;
  always @(posedge clk) begin
    if (rst) begin
      state <= ST_IDLE;
      fin_reg <= 1'b0;
      digest <= 32'd0;
      r_sram <= 32'd0; r_dram <= 32'd0; r_xt <= 32'd0; r_rlen <= 32'd0;
      r_ysize <= Y0; r_xsize <= {XW{1'b0}}; r_xstr <= {XSW{1'b0}}; r_yp0 <= {YP0W{1'b0}};
      r_xp0 <= {XP0W{1'b0}};
      pad_rem <= 64'd0; pad_rel <= 32'd0; nds <= 32'd0; runs_left <= Y0;
    end else begin
      fin_reg <= 1'b0;
      digest <= digest + cyc_sum;
      if (go) begin
        digest <= 32'd0;
        r_sram <= {{(32-SBW){1'b0}}, f_sram};
        r_dram <= f_dram;
        r_xt <= g_xt;
        r_rlen <= g_rlen;
        r_ysize <= f_ysize;
        r_xsize <= f_xsize;
        r_xstr <= f_xstr;
        r_yp0 <= f_yp0;
        r_xp0 <= f_xp0;
        pad_rem <= g_pads;
        pad_rel <= g_skip0 ? g_rlen : 32'd0;
        nds <= g_skip0 ? g_ds0 + g_xt : g_ds0;
        runs_left <= g_skip0 ? g_nruns - Y1 : g_nruns;
        if (g_pads != 64'd0) state <= ST_PAD;
        else if (f_ysize != Y0) state <= ST_DATA;
        else fin_reg <= 1'b1;
      end else if (state == ST_PAD) begin
        pad_rem <= pad_rem - 64'd1;
        if (runs_left != Y0 && pad_nxt == nds) begin
          pad_rel <= nds + r_rlen;
          nds <= nds + r_xt;
          runs_left <= runs_left - Y1;
        end else begin
          pad_rel <= pad_nxt;
        end
        if (last_pad) begin
          if (r_ysize != Y0) state <= ST_DATA;
          else begin
            state <= ST_IDLE;
            fin_reg <= 1'b1;
          end
        end
      end else if (state == ST_DATA && seq_done) begin
        state <= ST_IDLE;
      end
    end
  end
endmodule
