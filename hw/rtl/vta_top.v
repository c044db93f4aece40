`include "vta_params.vh"
// VTA top level: fetch, three command queues, four token counters, load/compute/store modules,
// the on-chip buffers and the single memory port, implementing docs/timing.md cycle for cycle.
// Cycle 0 is the first cycle after the clock edge at which `launch` is sampled 1 (after reset,
// while not done).  The DRAM is outside (tb_top): a bus-word array read combinationally at
// `mem_addr` and written at the clock edge when `mem_wr` is set; fetch reads `mem_insn_rdata`, the
// same address in the DRAM image as it was at launch (docs/timing.md 3: a STORE into the
// instruction region does not change what fetch reads).  The retire port reports, per
// module (0 load, 1 compute, 2 store, 32-bit fields packed low module first), the instruction that
// ends in the current cycle `cyc`; the dispatch port the instruction dispatched in it.
module vta_top (
  input  wire        clk,
  input  wire        rst,
  input  wire        launch,
  input  wire [31:0] insn_addr,
  input  wire [31:0] insn_count,
  // memory port
  output wire [31:0] mem_addr,
  input  wire [`VTA_BUS_BITS-1:0]   mem_rdata,
  input  wire [`VTA_BUS_BITS-1:0]   mem_insn_rdata,
  output wire        mem_wr,
  output wire [`VTA_BUS_BITS-1:0]   mem_wdata,
  output wire [`VTA_BUS_BITS/8-1:0] mem_wstrb,
  // status
  output reg         running,
  output reg         done,
  output reg         finish,
  output reg         error,
  output reg  [7:0]  error_code,
  output reg  [31:0] cycles,
  output reg  [31:0] cyc,
  // retire and dispatch port
  output wire [2:0]  ret_valid,
  output wire [95:0] ret_midx,
  output wire [95:0] ret_pidx,
  output wire [3*`VTA_HDR_OPCODE_W-1:0] ret_op,
  output wire [95:0] ret_start,
  output wire [95:0] ret_digest,
  output wire        disp_valid,
  output wire [31:0] disp_pidx,
  output wire        finish_now,
  output wire        error_now,
  output wire [7:0]  error_code_now,
  output wire [63:0] tokens,          // l2g, g2l, s2g, g2s (16 bits each, l2g lowest)
  output wire        quiet            // nothing in flight: see the end of the module
);
  // The configuration this netlist was generated for (checked against VTAConfig by
  // tests/rtl/test_rtl_static.py); the body reads the same values from vta_params.vh.
  /* verilator lint_off UNUSEDPARAM */
  localparam integer BATCH = `VTA_BATCH;
  localparam integer BLOCK_IN = `VTA_BLOCK_IN;
  localparam integer BLOCK_OUT = `VTA_BLOCK_OUT;
  localparam integer INP_WIDTH = `VTA_INP_WIDTH;
  localparam integer WGT_WIDTH = `VTA_WGT_WIDTH;
  localparam integer ACC_WIDTH = `VTA_ACC_WIDTH;
  localparam integer LOG_UOP_DEPTH = `VTA_LOG_UOP_DEPTH;
  localparam integer LOG_INP_DEPTH = `VTA_LOG_INP_DEPTH;
  localparam integer LOG_WGT_DEPTH = `VTA_LOG_WGT_DEPTH;
  localparam integer LOG_ACC_DEPTH = `VTA_LOG_ACC_DEPTH;
  localparam integer BUS_WIDTH = `VTA_BUS_BITS;
  localparam integer DRAM_LATENCY = `VTA_DRAM_LATENCY;
  localparam integer BURST_BEATS = `VTA_BURST_BEATS;
  localparam integer CMD_QUEUE_DEPTH = `VTA_CMD_QUEUE_DEPTH;
  localparam integer TOKEN_QUEUE_DEPTH = `VTA_TOKEN_QUEUE_DEPTH;
  localparam integer FETCH_INSNS = `VTA_FETCH_INSNS;
  localparam integer GEMM_PIPE_DEPTH = `VTA_GEMM_PIPE_DEPTH;
  localparam integer ALU_PIPE_DEPTH = `VTA_ALU_PIPE_DEPTH;
  /* verilator lint_on UNUSEDPARAM */

  localparam integer QW = `VTA_INSN_BITS + 32;
  localparam integer LQ = `VTA_LOG_CMD_QUEUE_DEPTH;
  localparam integer NC = 6;
  localparam integer BUS = `VTA_BUS_BITS;

  wire launch_go = launch && !running && !done;
  wire en = running;

  // ---- memory port --------------------------------------------------------------------------
  wire [NC-1:0]    req, grant, cmpl_next, beat;
  wire [NC*32-1:0] req_addr;
  wire [NC*9-1:0]  req_beats;
  wire [BUS-1:0]   st_wdata;
  wire [BUS/8-1:0] st_wstrb;
  wire             port_busy;
  vta_mem_port #(.NC(NC), .BUS(BUS), .LAT(`VTA_DRAM_LATENCY), .WRC(5)) u_port (
    .clk(clk), .rst(rst), .en(en), .req(req), .req_addr(req_addr), .req_beats(req_beats),
    .grant(grant), .cmpl_next(cmpl_next), .beat(beat), .mem_addr(mem_addr), .mem_wr(mem_wr),
    .wr_data_in(st_wdata), .wr_strb_in(st_wstrb), .mem_wdata(mem_wdata), .mem_wstrb(mem_wstrb),
    .busy_o(port_busy));

  // ---- fetch and queues ---------------------------------------------------------------------
  wire [2:0]    q_full, q_valid, enq, deq;
  wire [QW-1:0] enq_data;
  wire [3*QW-1:0] q_head;
  wire [3*(LQ+1)-1:0] q_count;
  wire          fetch_err, fetch_stall;
  wire [1:0]    fetch_state;
  vta_fetch u_fetch (
    .clk(clk), .rst(rst), .launch(launch_go), .en(en), .insn_addr(insn_addr),
    .insn_count(insn_count), .req(req[0]), .req_addr(req_addr[0 +: 32]),
    .req_beats(req_beats[0 +: 9]), .grant(grant[0]), .cmpl_next(cmpl_next[0]), .beat(beat[0]),
    .rd_data(mem_insn_rdata), .q_full(q_full), .enq(enq), .enq_data(enq_data),
    .disp_valid(disp_valid), .disp_pidx(disp_pidx), .err(fetch_err), .stall(fetch_stall),
    .state(fetch_state));

  genvar q;
  generate
    for (q = 0; q < 3; q = q + 1) begin : g_q
      vta_cmd_queue u_q (.clk(clk), .rst(rst), .enq(enq[q]), .enq_data(enq_data), .deq(deq[q]),
        .full(q_full[q]), .valid(q_valid[q]), .head(q_head[q*QW +: QW]),
        .count(q_count[q*(LQ+1) +: LQ+1]));
    end
  endgenerate

  // ---- tokens: [0] l2g, [1] g2l, [2] s2g, [3] g2s -------------------------------------------
  wire [3:0] tok_pop, tok_push, tok_avail;
  wire       tok_ovf;
  wire ld_pop_next, ld_push_next, cp_pop_prev, cp_pop_next, cp_push_prev, cp_push_next;
  wire st_pop_prev, st_push_prev;
  assign tok_pop  = {st_pop_prev, cp_pop_next, ld_pop_next, cp_pop_prev};
  assign tok_push = {cp_push_next, st_push_prev, cp_push_prev, ld_push_next};
  vta_tokens u_tokens (.clk(clk), .rst(rst), .pop(tok_pop), .push(tok_push), .avail(tok_avail),
                       .overflow(tok_ovf), .value(tokens));

  // ---- buffers ------------------------------------------------------------------------------
  localparam integer NSU = `VTA_SLOTS_UOP, NSI = `VTA_SLOTS_INP, NSW = `VTA_SLOTS_WGT;
  localparam integer NSO = `VTA_SLOTS_OUT, NWA = `VTA_ACC_NW;
  localparam integer UAW = `VTA_LOG_UOP_DEPTH, IAW = `VTA_LOG_INP_DEPTH;
  localparam integer WAW = `VTA_LOG_WGT_DEPTH, AAW = `VTA_LOG_ACC_DEPTH;
  localparam integer IEB = `VTA_INP_ELEM_BITS, WEB = `VTA_WGT_ELEM_BITS, AEB = `VTA_ACC_ELEM_BITS;

  wire [NSU-1:0] uop_we;  wire [NSU*UAW-1:0] uop_wa;  wire [NSU*`VTA_UOP_ELEM_BITS-1:0] uop_wd;
  wire [UAW-1:0] uop_ra;  wire [`VTA_UOP_ELEM_BITS-1:0] uop_rd;
  vta_sram #(.W(`VTA_UOP_ELEM_BITS), .AW(UAW), .NW(NSU), .NR(1)) u_uop_sram (
    .clk(clk), .rst(rst), .we(uop_we), .wa(uop_wa), .wd(uop_wd), .ra(uop_ra), .rd(uop_rd));

  wire [NSI-1:0] inp_we;  wire [NSI*IAW-1:0] inp_wa;  wire [NSI*IEB-1:0] inp_wd;
  wire [IAW-1:0] inp_ra;  wire [IEB-1:0] inp_rd;
  vta_sram #(.W(IEB), .AW(IAW), .NW(NSI), .NR(1)) u_inp_sram (.clk(clk), .rst(rst), .we(inp_we),
    .wa(inp_wa), .wd(inp_wd), .ra(inp_ra), .rd(inp_rd));

  wire [NSW-1:0] wgt_we;  wire [NSW*WAW-1:0] wgt_wa;  wire [NSW*WEB-1:0] wgt_wd;
  wire [WAW-1:0] wgt_ra;  wire [WEB-1:0] wgt_rd;
  vta_sram #(.W(WEB), .AW(WAW), .NW(NSW), .NR(1)) u_wgt_sram (.clk(clk), .rst(rst), .we(wgt_we),
    .wa(wgt_wa), .wd(wgt_wd), .ra(wgt_ra), .rd(wgt_rd));

  wire [NWA-1:0] acc_we;  wire [NWA*AAW-1:0] acc_wa;  wire [NWA*AEB-1:0] acc_wd;
  wire [2*AAW-1:0] cp_acc_ra;  wire [2*AEB-1:0] cp_acc_rd;
  wire [NSO*AAW-1:0] st_acc_ra; wire [NSO*AEB-1:0] st_acc_rd;
  vta_sram #(.W(AEB), .AW(AAW), .NW(NWA), .NR(2 + NSO)) u_acc_sram (.clk(clk), .rst(rst),
    .we(acc_we), .wa(acc_wa), .wd(acc_wd), .ra({st_acc_ra, cp_acc_ra}), .rd({st_acc_rd, cp_acc_rd}));

  // ---- modules ------------------------------------------------------------------------------
  wire load_busy, compute_busy, store_busy;
  vta_load u_load (
    .clk(clk), .rst(rst), .en(en), .cyc(cyc), .head_valid(q_valid[0]), .head(q_head[0 +: QW]),
    .tok_next_ok(tok_avail[1]), .deq(deq[0]), .pop_next(ld_pop_next), .push_next(ld_push_next),
    .inp_req(req[2]), .inp_req_addr(req_addr[2*32 +: 32]), .inp_req_beats(req_beats[2*9 +: 9]),
    .inp_grant(grant[2]), .inp_cmpl_next(cmpl_next[2]), .inp_beat(beat[2]),
    .wgt_req(req[3]), .wgt_req_addr(req_addr[3*32 +: 32]), .wgt_req_beats(req_beats[3*9 +: 9]),
    .wgt_grant(grant[3]), .wgt_cmpl_next(cmpl_next[3]), .wgt_beat(beat[3]), .rd_data(mem_rdata),
    .inp_we(inp_we), .inp_wa(inp_wa), .inp_wd(inp_wd), .wgt_we(wgt_we), .wgt_wa(wgt_wa),
    .wgt_wd(wgt_wd), .busy(load_busy), .ret_valid(ret_valid[0]), .ret_midx(ret_midx[0 +: 32]),
    .ret_pidx(ret_pidx[0 +: 32]), .ret_start(ret_start[0 +: 32]),
    .ret_digest(ret_digest[0 +: 32]), .ret_op(ret_op[0 +: `VTA_HDR_OPCODE_W]));

  vta_compute u_compute (
    .clk(clk), .rst(rst), .en(en), .cyc(cyc), .head_valid(q_valid[1]), .head(q_head[QW +: QW]),
    .tok_prev_ok(tok_avail[0]), .tok_next_ok(tok_avail[2]), .deq(deq[1]), .pop_prev(cp_pop_prev),
    .pop_next(cp_pop_next), .push_prev(cp_push_prev), .push_next(cp_push_next),
    .uop_req(req[1]), .uop_req_addr(req_addr[1*32 +: 32]), .uop_req_beats(req_beats[1*9 +: 9]),
    .uop_grant(grant[1]), .uop_cmpl_next(cmpl_next[1]), .uop_beat(beat[1]),
    .acc_req(req[4]), .acc_req_addr(req_addr[4*32 +: 32]), .acc_req_beats(req_beats[4*9 +: 9]),
    .acc_grant(grant[4]), .acc_cmpl_next(cmpl_next[4]), .acc_beat(beat[4]), .rd_data(mem_rdata),
    .uop_we(uop_we), .uop_wa(uop_wa), .uop_wd(uop_wd), .uop_ra(uop_ra), .uop_rd(uop_rd),
    .acc_we(acc_we), .acc_wa(acc_wa), .acc_wd(acc_wd), .acc_ra(cp_acc_ra), .acc_rd(cp_acc_rd),
    .inp_ra(inp_ra), .inp_rd(inp_rd), .wgt_ra(wgt_ra), .wgt_rd(wgt_rd), .busy(compute_busy),
    .ret_valid(ret_valid[1]), .ret_midx(ret_midx[32 +: 32]), .ret_pidx(ret_pidx[32 +: 32]),
    .ret_start(ret_start[32 +: 32]), .ret_digest(ret_digest[32 +: 32]),
    .ret_op(ret_op[`VTA_HDR_OPCODE_W +: `VTA_HDR_OPCODE_W]));

  vta_store u_store (
    .clk(clk), .rst(rst), .en(en), .cyc(cyc), .head_valid(q_valid[2]), .head(q_head[2*QW +: QW]),
    .tok_prev_ok(tok_avail[3]), .deq(deq[2]), .pop_prev(st_pop_prev), .push_prev(st_push_prev),
    .req(req[5]), .req_addr(req_addr[5*32 +: 32]), .req_beats(req_beats[5*9 +: 9]),
    .grant(grant[5]), .cmpl_next(cmpl_next[5]), .beat(beat[5]), .beat_addr(mem_addr),
    .wr_data(st_wdata), .wr_strb(st_wstrb), .acc_ra(st_acc_ra), .acc_rd(st_acc_rd),
    .busy(store_busy), .ret_valid(ret_valid[2]), .ret_midx(ret_midx[64 +: 32]),
    .ret_pidx(ret_pidx[64 +: 32]), .ret_start(ret_start[64 +: 32]),
    .ret_digest(ret_digest[64 +: 32]), .ret_op(ret_op[2*`VTA_HDR_OPCODE_W +: `VTA_HDR_OPCODE_W]));

  // ---- end of run (docs/timing.md 7) --------------------------------------------------------
  wire fin_end = en && ret_valid[1] && ret_op[`VTA_HDR_OPCODE_W +: `VTA_HDR_OPCODE_W] == `VTA_OP_FINISH;
  wire others_done = (q_count == {(3*(LQ+1)){1'b0}})
                  && (!load_busy || ret_valid[0]) && (!store_busy || ret_valid[2]);
  wire e_tok = en && tok_ovf;
  wire e_dec = en && fetch_err;
  wire e_fin = fin_end && !others_done;
  assign error_now      = e_tok || e_dec || e_fin;
  assign error_code_now = e_tok ? 8'd1 : (e_dec ? 8'd3 : (e_fin ? 8'd5 : 8'd0));
  assign finish_now     = fin_end && !error_now;

  always @(posedge clk) begin
    if (rst) begin
      running <= 1'b0;
      done <= 1'b0;
      finish <= 1'b0;
      error <= 1'b0;
      error_code <= 8'd0;
      cycles <= 32'd0;
      cyc <= 32'd0;
    end else if (launch_go) begin
      running <= 1'b1;
      cyc <= 32'd0;
    end else if (running) begin
      cyc <= cyc + 32'd1;
      if (finish_now || error_now) begin
        running <= 1'b0;
        done <= 1'b1;
        finish <= finish_now;
        error <= error_now;
        error_code <= error_code_now;
        cycles <= cyc + 32'd1;
      end
    end
  end

  // Nothing in flight this cycle (the testbench's deadlock detector, docs/cosim.md): no module
  // executes an instruction, the memory port has no burst in service and no request pending, and
  // fetch dispatches nothing.  A live program is quiet for at most one cycle in a row (the cycle a
  // module starts, before its busy flag is set); a deadlocked one stays quiet for ever.
  assign quiet = en && !load_busy && !compute_busy && !store_busy && !port_busy && (req == {NC{1'b0}})
              && !disp_valid;

  // Waveform-friendly names for the model's VCD (busy flags, occupancies, fetch state).
  wire [LQ:0] load_q_count = q_count[0 +: LQ+1];
  wire [LQ:0] compute_q_count = q_count[(LQ+1) +: LQ+1];
  wire [LQ:0] store_q_count = q_count[2*(LQ+1) +: LQ+1];
  wire unused_ok = &{1'b0, fetch_stall, fetch_state, load_q_count, compute_q_count,
                     store_q_count};
endmodule
