`include "vta_params.vh"
// Fetch and dispatch (docs/timing.md 3): one chunk of FETCH_INSNS instructions in flight at a time,
// read as one DMA transfer by client 0; once its last burst completes (cycle c) the instructions
// are dispatched in program order, at most one per cycle, each waiting for room in its queue; the
// next chunk's first request is at d+1 after the chunk's last dispatch d.  Undecodable
// instructions raise `err` in the cycle they would be dispatched.
module vta_fetch (
  input  wire        clk,
  input  wire        rst,
  input  wire        launch,       // the edge that starts cycle 0
  input  wire        en,
  input  wire [31:0] insn_addr,
  input  wire [31:0] insn_count,
  output wire        req,
  output wire [31:0] req_addr,
  output wire [8:0]  req_beats,
  input  wire        grant,
  input  wire        cmpl_next,
  input  wire        beat,
  input  wire [`VTA_BUS_BITS-1:0] rd_data,
  input  wire [2:0]  q_full,       // load, compute, store
  output wire [2:0]  enq,
  output wire [`VTA_INSN_BITS+31:0] enq_data,
  output wire        disp_valid,
  output wire [31:0] disp_pidx,
  output wire        err,
  output wire        stall,        // holds an instruction whose queue is full
  output reg  [1:0]  state
);
  localparam integer F = `VTA_FETCH_INSNS;
  localparam integer LF = (`VTA_LOG_FETCH_INSNS > 0) ? `VTA_LOG_FETCH_INSNS : 1;
  localparam integer NS = `VTA_SLOTS_INSN;
  localparam integer LB = `VTA_LOG_BUS_BYTES;
  localparam [31:0] F32 = F;
  localparam [1:0] ST_IDLE = 2'd0, ST_FETCH = 2'd1, ST_DISP = 2'd2, ST_DONE = 2'd3;

  reg [`VTA_INSN_BITS-1:0] chunk [0:F-1];
  reg [31:0] chunk_pidx, chunk_cnt, j;

  // ---- chunk transfer ---------------------------------------------------------------------
  wire [31:0] next_pidx = launch ? 32'd0 : chunk_pidx + chunk_cnt;
  wire [31:0] left      = insn_count - next_pidx;
  wire [31:0] next_cnt  = (left < F32) ? left : F32;
  wire        last_disp;
  wire        more      = (next_pidx < insn_count);
  wire        seq_start = (launch && insn_count != 32'd0) || (last_disp && more);
  wire [31:0] beat_j;
  wire [LB-1:0] row_off;
  wire [`VTA_MEM_Y_SIZE_W-1:0] row_unused;
  wire        seq_done;
  vta_dma_seq #(.LB(LB), .LK(`VTA_LOG_BURST_BEATS)) u_seq (
    .clk(clk), .rst(rst), .start(seq_start),
    .base(insn_addr + (next_pidx << `VTA_LOG_INSN_BYTES)), .row_bytes(next_cnt << `VTA_LOG_INSN_BYTES),
    .stride(32'd0), .nrows({{(`VTA_MEM_Y_SIZE_W-1){1'b0}}, 1'b1}),
    .req(req), .req_addr(req_addr), .req_beats(req_beats),
    .grant(grant), .cmpl_next(cmpl_next), .beat(beat), .beat_j(beat_j), .row(row_unused),
    .row_off(row_off), .done(seq_done));

  wire [NS-1:0]                  sv;
  wire [NS*32-1:0]               sx;
  wire [NS*`VTA_INSN_BITS-1:0]   sd;
  vta_unpack #(.EB(`VTA_INSN_BITS), .BUS(`VTA_BUS_BITS), .LB(LB), .NS(NS)) u_unpack (
    .clk(clk), .rst(rst), .beat(beat), .data(rd_data), .beat_j(beat_j), .off(row_off),
    .nel(chunk_cnt), .sv(sv), .sx(sx), .sd(sd));

  integer s;
  always @(posedge clk) begin
    for (s = 0; s < NS; s = s + 1)
      if (sv[s]) chunk[sx[s*32 +: LF]] <= sd[s*`VTA_INSN_BITS +: `VTA_INSN_BITS];
  end

  // ---- dispatch ---------------------------------------------------------------------------
  wire        disp_en = (state == ST_DISP) || (state == ST_FETCH && seq_done);
  wire [`VTA_INSN_BITS-1:0] insn = chunk[j[LF-1:0]];
  wire [31:0] pidx  = chunk_pidx + j;
  wire [`VTA_HDR_OPCODE_W-1:0] op = insn[`VTA_HDR_OPCODE_LSB +: `VTA_HDR_OPCODE_W];
  // 8 bits wide so that the legacy 2-bit layout (HW_VER 0.0.1) compares cleanly with every constant
  wire [7:0]  mt  = {{(8-`VTA_MEM_MEMORY_TYPE_W){1'b0}}, insn[`VTA_MEM_MEMORY_TYPE_LSB +: `VTA_MEM_MEMORY_TYPE_W]};
  // the ALU opcodes of hw/alu.py this HW_VER has: bit c of the mask set for opcode c
  localparam [(1<<`VTA_ALU_ALU_OPCODE_W)-1:0] ALU_LEGAL = `VTA_ALU_LEGAL_MASK;
  wire        aop_ok = ALU_LEGAL[insn[`VTA_ALU_ALU_OPCODE_LSB +: `VTA_ALU_ALU_OPCODE_W]];
  wire        xs_nz = insn[`VTA_MEM_X_SIZE_LSB +: `VTA_MEM_X_SIZE_W] != {`VTA_MEM_X_SIZE_W{1'b0}};
  wire        prev_flags = insn[`VTA_HDR_POP_PREV_LSB] || insn[`VTA_HDR_PUSH_PREV_LSB];
  wire        next_flags = insn[`VTA_HDR_POP_NEXT_LSB] || insn[`VTA_HDR_PUSH_NEXT_LSB];
  wire        is_load  = (op == `VTA_OP_LOAD);
  wire        is_store = (op == `VTA_OP_STORE);
  wire        to_load  = is_load && (mt == `VTA_MEM_INP || mt == `VTA_MEM_WGT);
  wire        is_last  = (pidx == insn_count - 32'd1);
  wire        is_fin   = (op == `VTA_OP_FINISH);
  wire        bad = (op > `VTA_OP_ALU)
                 || (is_load && !(mt == `VTA_MEM_UOP || mt == `VTA_MEM_WGT || mt == `VTA_MEM_INP
                                  || mt == `VTA_MEM_ACC || mt == `VTA_MEM_ACC_8BIT))
                 || (is_store && xs_nz && mt != `VTA_MEM_OUT)
                 || (op == `VTA_OP_ALU && !aop_ok)
                 || (is_fin != is_last)
                 || (to_load && prev_flags) || (is_store && next_flags);
  wire [1:0]  dest = to_load ? 2'd0 : (is_store ? 2'd2 : 2'd1);
  wire        room = !q_full[dest];
  wire        fire = en && disp_en && room && !bad;

  assign err        = en && disp_en && bad;
  assign stall      = en && disp_en && !room && !bad;
  assign enq        = fire ? (3'b001 << dest) : 3'b000;
  assign enq_data   = {pidx, insn};
  assign disp_valid = fire;
  assign disp_pidx  = pidx;
  assign last_disp  = fire && (j == chunk_cnt - 32'd1);

  always @(posedge clk) begin
    if (rst) begin
      state <= ST_IDLE;
      chunk_pidx <= 32'd0;
      chunk_cnt <= 32'd0;
      j <= 32'd0;
    end else begin
      if (seq_start) begin
        state <= ST_FETCH;
        chunk_pidx <= next_pidx;
        chunk_cnt <= next_cnt;
        j <= 32'd0;
      end else if (fire) begin
        j <= j + 32'd1;
        if (last_disp) state <= ST_DONE;
        else state <= ST_DISP;
      end else if (disp_en) begin
        state <= ST_DISP;
      end
    end
  end
endmodule
