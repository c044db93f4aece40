`include "vta_params.vh"
// GEMM and ALU loop engine (docs/timing.md 6).  Started at s with N = iter_out*iter_in*uops > 0,
// it issues uop k at s+1+k (GEMM, ALU immediate) or s+1+2k (ALU vector: one cycle reads the
// source, the next the destination), in the uop-innermost order of hardware spec 3.4, and ends
// PIPE_DEPTH cycles after the last issue.  The datapath computes each uop completely in its issue
// cycle and writes the accumulator at the end of it, so consecutive uops on one accumulator
// element see each other's results as in fsim; the pipeline depth only shapes the end cycle.
module vta_tensor (
  input  wire        clk,
  input  wire        rst,
  input  wire        go,
  /* verilator lint_off UNUSEDSIGNAL */
  input  wire [`VTA_INSN_BITS-1:0] insn,    // the whole word; GEMM/ALU use their loop fields
  /* verilator lint_on UNUSEDSIGNAL */
  output wire [`VTA_LOG_UOP_DEPTH-1:0] uop_ra,
  input  wire [`VTA_UOP_ELEM_BITS-1:0] uop_rd,
  output wire [`VTA_LOG_ACC_DEPTH-1:0] acc_ra_dst,
  output wire [`VTA_LOG_ACC_DEPTH-1:0] acc_ra_src,
  input  wire [`VTA_ACC_ELEM_BITS-1:0] acc_rd_dst,
  input  wire [`VTA_ACC_ELEM_BITS-1:0] acc_rd_src,
  output wire [`VTA_LOG_INP_DEPTH-1:0] inp_ra,
  input  wire [`VTA_INP_ELEM_BITS-1:0] inp_rd,
  output wire [`VTA_LOG_WGT_DEPTH-1:0] wgt_ra,
  input  wire [`VTA_WGT_ELEM_BITS-1:0] wgt_rd,
  output wire        acc_we,
  output wire [`VTA_LOG_ACC_DEPTH-1:0] acc_wa,
  output wire [`VTA_ACC_ELEM_BITS-1:0] acc_wd,
  output wire        fin,
  output reg  [31:0] digest
);
  localparam integer UW = `VTA_LOG_UOP_DEPTH;
  localparam integer IOW = `VTA_GEMM_ITER_OUT_W;   // loop counter and immediate widths: hw.isa layout
  localparam integer IIW = `VTA_GEMM_ITER_IN_W;
  localparam integer MW = `VTA_ALU_IMM_W;
  localparam [IOW-1:0] IO_ONE = {{(IOW-1){1'b0}}, 1'b1};
  localparam [IIW-1:0] II_ONE = {{(IIW-1){1'b0}}, 1'b1};
  localparam [7:0] GEMM_PD = `VTA_GEMM_PIPE_DEPTH;
  localparam [7:0] ALU_PD = `VTA_ALU_PIPE_DEPTH;

  // GEMM and ALU share the loop fields' positions (hardware spec 2.5/2.6).
  wire        f_alu   = insn[`VTA_HDR_OPCODE_LSB +: `VTA_HDR_OPCODE_W] == `VTA_OP_ALU;
  wire        f_reset = insn[`VTA_GEMM_RESET_REG_LSB];
  wire [UW:0] f_bgn   = {1'b0, insn[`VTA_GEMM_UOP_BGN_LSB +: `VTA_GEMM_UOP_BGN_W]};
  wire [UW:0] f_end   = insn[`VTA_GEMM_UOP_END_LSB +: `VTA_GEMM_UOP_END_W];
  wire [IOW-1:0] f_iout = insn[`VTA_GEMM_ITER_OUT_LSB +: `VTA_GEMM_ITER_OUT_W];
  wire [IIW-1:0] f_iin  = insn[`VTA_GEMM_ITER_IN_LSB +: `VTA_GEMM_ITER_IN_W];
  wire [31:0] f_dfo   = {{(32-`VTA_GEMM_DST_FACTOR_OUT_W){1'b0}}, insn[`VTA_GEMM_DST_FACTOR_OUT_LSB +: `VTA_GEMM_DST_FACTOR_OUT_W]};
  wire [31:0] f_dfi   = {{(32-`VTA_GEMM_DST_FACTOR_IN_W){1'b0}}, insn[`VTA_GEMM_DST_FACTOR_IN_LSB +: `VTA_GEMM_DST_FACTOR_IN_W]};
  wire [31:0] f_gsfo  = {{(32-`VTA_GEMM_SRC_FACTOR_OUT_W){1'b0}}, insn[`VTA_GEMM_SRC_FACTOR_OUT_LSB +: `VTA_GEMM_SRC_FACTOR_OUT_W]};
  wire [31:0] f_gsfi  = {{(32-`VTA_GEMM_SRC_FACTOR_IN_W){1'b0}}, insn[`VTA_GEMM_SRC_FACTOR_IN_LSB +: `VTA_GEMM_SRC_FACTOR_IN_W]};
  wire [31:0] f_asfo  = {{(32-`VTA_ALU_SRC_FACTOR_OUT_W){1'b0}}, insn[`VTA_ALU_SRC_FACTOR_OUT_LSB +: `VTA_ALU_SRC_FACTOR_OUT_W]};
  wire [31:0] f_asfi  = {{(32-`VTA_ALU_SRC_FACTOR_IN_W){1'b0}}, insn[`VTA_ALU_SRC_FACTOR_IN_LSB +: `VTA_ALU_SRC_FACTOR_IN_W]};
  wire [31:0] f_wfo   = {{(32-`VTA_GEMM_WGT_FACTOR_OUT_W){1'b0}}, insn[`VTA_GEMM_WGT_FACTOR_OUT_LSB +: `VTA_GEMM_WGT_FACTOR_OUT_W]};
  wire [31:0] f_wfi   = {{(32-`VTA_GEMM_WGT_FACTOR_IN_W){1'b0}}, insn[`VTA_GEMM_WGT_FACTOR_IN_LSB +: `VTA_GEMM_WGT_FACTOR_IN_W]};
  wire [`VTA_ALU_ALU_OPCODE_W-1:0] f_aop = insn[`VTA_ALU_ALU_OPCODE_LSB +: `VTA_ALU_ALU_OPCODE_W];
  wire        f_imm_en = insn[`VTA_ALU_USE_IMM_LSB];
  wire [MW-1:0] f_imm     = insn[`VTA_ALU_IMM_LSB +: `VTA_ALU_IMM_W];

  localparam [1:0] ST_IDLE = 2'd0, ST_ISSUE = 2'd1, ST_TAIL = 2'd2;
  reg [1:0]  state;
  reg        phase;              // vector ALU: 1 = the second cycle of a uop
  reg        r_alu, r_reset, r_imm_en;
  reg [`VTA_ALU_ALU_OPCODE_W-1:0] r_aop;
  reg [MW-1:0] r_imm;
  reg [UW:0] r_bgn, r_end, u;
  reg [IOW-1:0] r_iout, i_out;
  reg [IIW-1:0] r_iin, i_in;
  reg [31:0] r_dfo, r_dfi, r_sfo, r_sfi, r_wfo, r_wfi;
  reg [31:0] o_d, o_s, o_w, n_d, n_s, n_w;    // i_out*factor_out, i_in*factor_in
  reg [7:0]  tail;

  wire [31:0] uop_dst = {{(32-`VTA_UOP_DST_IDX_W){1'b0}}, uop_rd[`VTA_UOP_DST_IDX_LSB +: `VTA_UOP_DST_IDX_W]};
  wire [31:0] uop_src = {{(32-`VTA_UOP_SRC_IDX_W){1'b0}}, uop_rd[`VTA_UOP_SRC_IDX_LSB +: `VTA_UOP_SRC_IDX_W]};
  wire [31:0] uop_wgt = {{(32-`VTA_UOP_WGT_IDX_W){1'b0}}, uop_rd[`VTA_UOP_WGT_IDX_LSB +: `VTA_UOP_WGT_IDX_W]};
  // Indices wrap to the buffer depths; out-of-range programs are rejected before they reach the
  // RTL (sim.program).  The digest uses the full destination index.
  wire [31:0] dst_idx = uop_dst + o_d + n_d;
  /* verilator lint_off UNUSEDSIGNAL */
  wire [31:0] src_idx = uop_src + o_s + n_s;
  wire [31:0] wgt_idx = uop_wgt + o_w + n_w;
  /* verilator lint_on UNUSEDSIGNAL */

  assign uop_ra     = u[UW-1:0];
  assign acc_ra_dst = dst_idx[`VTA_LOG_ACC_DEPTH-1:0];
  assign acc_ra_src = src_idx[`VTA_LOG_ACC_DEPTH-1:0];
  assign inp_ra     = src_idx[`VTA_LOG_INP_DEPTH-1:0];
  assign wgt_ra     = wgt_idx[`VTA_LOG_WGT_DEPTH-1:0];

  wire issue = (state == ST_ISSUE) && !phase;
  wire [`VTA_ACC_ELEM_BITS-1:0] gemm_out, alu_out;
  vta_gemm_core u_gemm (.en(issue && !r_alu && !r_reset), .acc_in(acc_rd_dst), .inp(inp_rd), .wgt(wgt_rd), .acc_out(gemm_out));
  vta_alu_core u_alu (.en(issue && r_alu), .op(r_aop), .use_imm(r_imm_en), .imm(r_imm), .dst_in(acc_rd_dst),
                      .src_in(acc_rd_src), .out(alu_out));

  assign acc_we = issue;
  assign acc_wa = dst_idx[`VTA_LOG_ACC_DEPTH-1:0];
  assign acc_wd = r_alu ? alu_out : (r_reset ? {`VTA_ACC_ELEM_BITS{1'b0}} : gemm_out);
  assign fin    = (state == ST_TAIL) && (tail == 8'd1);

  wire [31:0] dsum;
  vta_digest #(.W(`VTA_ACC_ELEM_BITS)) u_dig (.idx(dst_idx), .data(acc_wd),
    .mask({(`VTA_ACC_ELEM_BITS/32){issue}}), .sum(dsum));

  wire u_last  = (u == r_end - 1'b1);
  wire in_last = (i_in == r_iin - II_ONE);
  wire out_last = (i_out == r_iout - IO_ONE);

  always @(posedge clk) begin
    if (rst) begin
      state <= ST_IDLE; phase <= 1'b0; digest <= 32'd0; tail <= 8'd0;
      r_alu <= 1'b0; r_reset <= 1'b0; r_imm_en <= 1'b0; r_aop <= {`VTA_ALU_ALU_OPCODE_W{1'b0}};
      r_imm <= {MW{1'b0}}; r_bgn <= {(UW+1){1'b0}}; r_end <= {(UW+1){1'b0}}; u <= {(UW+1){1'b0}};
      r_iout <= {IOW{1'b0}}; r_iin <= {IIW{1'b0}}; i_out <= {IOW{1'b0}}; i_in <= {IIW{1'b0}};
      r_dfo <= 32'd0; r_dfi <= 32'd0; r_sfo <= 32'd0; r_sfi <= 32'd0; r_wfo <= 32'd0; r_wfi <= 32'd0;
      o_d <= 32'd0; o_s <= 32'd0; o_w <= 32'd0; n_d <= 32'd0; n_s <= 32'd0; n_w <= 32'd0;
    end else if (go) begin
      state <= ST_ISSUE; phase <= 1'b0; digest <= 32'd0;
      r_alu <= f_alu; r_reset <= f_reset && !f_alu; r_imm_en <= f_imm_en; r_aop <= f_aop; r_imm <= f_imm;
      r_bgn <= f_bgn; r_end <= f_end; u <= f_bgn;
      r_iout <= f_iout; r_iin <= f_iin; i_out <= {IOW{1'b0}}; i_in <= {IIW{1'b0}};
      r_dfo <= f_dfo; r_dfi <= f_dfi;
      r_sfo <= f_alu ? f_asfo : f_gsfo; r_sfi <= f_alu ? f_asfi : f_gsfi;
      r_wfo <= f_alu ? 32'd0 : f_wfo; r_wfi <= f_alu ? 32'd0 : f_wfi;
      o_d <= 32'd0; o_s <= 32'd0; o_w <= 32'd0; n_d <= 32'd0; n_s <= 32'd0; n_w <= 32'd0;
    end else if (state == ST_ISSUE) begin
      if (phase) begin
        phase <= 1'b0;
      end else begin
        digest <= digest + dsum;
        phase <= r_alu && !r_imm_en;
        if (u_last && in_last && out_last) begin
          state <= ST_TAIL;
          phase <= 1'b0;
          tail <= r_alu ? ALU_PD : GEMM_PD;
        end else if (!u_last) begin
          u <= u + 1'b1;
        end else begin
          u <= r_bgn;
          if (!in_last) begin
            i_in <= i_in + II_ONE;
            n_d <= n_d + r_dfi; n_s <= n_s + r_sfi; n_w <= n_w + r_wfi;
          end else begin
            i_in <= {IIW{1'b0}};
            n_d <= 32'd0; n_s <= 32'd0; n_w <= 32'd0;
            i_out <= i_out + IO_ONE;
            o_d <= o_d + r_dfo; o_s <= o_s + r_sfo; o_w <= o_w + r_wfo;
          end
        end
      end
    end else if (state == ST_TAIL) begin
      tail <= tail - 8'd1;
      if (tail == 8'd1) state <= ST_IDLE;
    end
  end
endmodule
