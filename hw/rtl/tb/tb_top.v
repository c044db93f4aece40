`include "vta_params.vh"
// HDL testbench of the RTL <-> cosim interface: vta_top, the DRAM model, the retire monitor,
// the watchdog and the file I/O.  cocotb only drives the ports below, never per cycle.
//
// Clock: with VTASIM_TB_CLOCK_HALF defined (the half period in time units, sim/rtl/runner.py passes
// it) the testbench makes its own clock and `clk` is an output: high at time 0, falling at one half
// period, rising at the next, like cocotb's Clock, so a run costs the simulator no callback per edge.
// Without it `clk` is an input that cocotb (or tests/rtl/hdl/tb_drive.v) drives.
//
// DRAM model: TB_DRAM_BYTES bytes as bus words, read combinationally at the RTL's memory port
// address, written with byte strobes at the clock edge.  The DRAM latency and the beat timing of
// docs/timing.md 4.2 live in the RTL's port (vta_mem_port), so this model has no timing of its own.
// trace.txt lines (docs/timing.md 9 order: end cycle, then load < compute < store):
//   R <module> <index_in_module> <program_index> <opcode> <start> <end> <digest hex8>
//   D <program_index> <cycle>      then at the end  F <cycles>  or  E <error_code> <cycle>
//   (a deadlock: E 4 <cycle of the first quiet cycle> <tokens hex16>)
// Deadlock detector (docs/cosim.md "Deadlocks and the watchdog"): vta_top's `quiet` says nothing is in
// flight (no instruction executing, no memory request or burst, no dispatch).  By docs/timing.md 2, 5
// and 6 every start follows a retirement or a dispatch by one cycle, so a live program is quiet for
// at most one cycle in a row; DEADLOCK_QUIET quiet cycles in a row stop the run with error 4, and the
// cycle reported is the first of them (the cycle the cycle engine names in its deadlock report).
// `max_quiet` is the longest quiet stretch of the run (tests hold it to the bound).
module tb_top (
`ifdef VTASIM_TB_CLOCK_HALF
  output reg         clk,
`else
  input  wire        clk,
`endif
  input  wire        rst,
  input  wire        launch,
  input  wire [31:0] insn_addr,
  input  wire [31:0] insn_count,
  input  wire [31:0] max_cycles,
  input  wire        cmd_load,
  input  wire        cmd_dump,
  input  wire [31:0] dump_first,
  input  wire [31:0] dump_last,
  output wire        done,
  output wire        finish,
  output wire        error,
  output wire [7:0]  error_code,
  output wire [31:0] cycles,
  output reg  [31:0] max_quiet
);
`ifdef VTASIM_TB_CLOCK_HALF
  initial clk = 1'b1;
  always #(`VTASIM_TB_CLOCK_HALF) clk = !clk;
`endif

  localparam integer BUS = `VTA_BUS_BITS;
  localparam integer WORDS = `VTA_TB_DRAM_WORDS;
  localparam integer LW = `VTA_LOG_TB_DRAM_WORDS;

  reg [BUS-1:0] dram [0:WORDS-1];
  reg [BUS-1:0] dram_launch [0:WORDS-1];   // the image as loaded: what fetch reads

  wire [31:0]      mem_addr;
  wire             mem_wr;
  wire [BUS-1:0]   mem_wdata;
  wire [BUS/8-1:0] mem_wstrb;
  wire             in_range = (mem_addr >> LW) == 32'd0;
  wire [BUS-1:0]   mem_rdata = in_range ? dram[mem_addr[LW-1:0]] : {BUS{1'b0}};
  wire [BUS-1:0]   mem_insn_rdata = in_range ? dram_launch[mem_addr[LW-1:0]] : {BUS{1'b0}};

  wire        running, v_done, v_finish, v_error;
  wire [7:0]  v_code;
  wire [31:0] v_cycles, cyc;
  wire [2:0]  ret_valid;
  wire [95:0] ret_midx, ret_pidx, ret_start, ret_digest;
  wire [3*`VTA_HDR_OPCODE_W-1:0] ret_op;
  wire        disp_valid, finish_now, error_now;
  wire [31:0] disp_pidx;
  wire [7:0]  error_code_now;
  wire [63:0] tokens;
  wire        quiet;

  vta_top u_vta (
    .clk(clk), .rst(rst), .launch(launch), .insn_addr(insn_addr), .insn_count(insn_count),
    .mem_addr(mem_addr), .mem_rdata(mem_rdata), .mem_insn_rdata(mem_insn_rdata), .mem_wr(mem_wr), .mem_wdata(mem_wdata),
    .mem_wstrb(mem_wstrb), .running(running), .done(v_done), .finish(v_finish), .error(v_error),
    .error_code(v_code), .cycles(v_cycles), .cyc(cyc), .ret_valid(ret_valid), .ret_midx(ret_midx),
    .ret_pidx(ret_pidx), .ret_op(ret_op), .ret_start(ret_start), .ret_digest(ret_digest),
    .disp_valid(disp_valid), .disp_pidx(disp_pidx), .finish_now(finish_now),
    .error_now(error_now), .error_code_now(error_code_now), .tokens(tokens), .quiet(quiet));

  // ---- watchdog (no FINISH within max_cycles cycles -> error 2) and deadlock (error 4) ---------
  localparam [31:0] DEADLOCK_QUIET = 32'd4;
  reg        wd;            // the testbench stopped the run (watchdog or deadlock)
  reg [7:0]  wd_code;
  reg [31:0] wd_cycles;
  reg [31:0] quiet_n;       // quiet cycles in a row before this one
  wire       live   = running && !finish_now && !error_now;
  wire       dl_now = live && quiet && (quiet_n + 32'd1 >= DEADLOCK_QUIET);
  wire       wd_now = live && !dl_now && (cyc + 32'd1 >= max_cycles);
  assign done       = v_done || wd;
  assign finish     = v_finish && !wd;
  assign error      = v_error || wd;
  assign error_code = wd ? wd_code : v_code;
  assign cycles     = wd ? wd_cycles : v_cycles;

  // ---- DRAM writes and file commands --------------------------------------------------------
  // The DRAM is cleared on the first reset cycle, so bytes the image does not define read as 0:
  // the words below `dirty`, all of them before the first reset, then those a job can have made
  // non-zero (its image, dump_last + 1 words as every driver sets it, and every word written).
  wire [BUS-1:0] merged;      // the addressed word with the strobed bytes of mem_wdata
  genvar gb;
  generate
    for (gb = 0; gb < BUS / 8; gb = gb + 1) begin : g_byte
      assign merged[gb*8 +: 8] = mem_wstrb[gb] ? mem_wdata[gb*8 +: 8] : mem_rdata[gb*8 +: 8];
    end
  endgenerate
  localparam [31:0] WORDS32 = WORDS;
  integer i, fd;
  reg rst_d;
  reg  [31:0] dirty;
  wire        dram_we = mem_wr && in_range && !wd;
  wire [31:0] wr_hi   = dram_we ? {{(32-LW){1'b0}}, mem_addr[LW-1:0]} + 32'd1 : 32'd0;
  wire [31:0] ld_hi   = !(cmd_load && !running) ? 32'd0 : (dump_last >= WORDS32) ? WORDS32 : dump_last + 32'd1;
  initial begin
    fd = 0;
    rst_d = 1'b0;
    dirty = WORDS32;
  end
  always @(posedge clk) begin
    rst_d <= rst;
    if (rst && !rst_d) begin
      for (i = 0; i < dirty; i = i + 1) dram[i] <= {BUS{1'b0}};
      dirty <= 32'd0;
    end else begin
      if (dram_we) dram[mem_addr[LW-1:0]] <= merged;
      if (wr_hi > dirty || ld_hi > dirty) dirty <= (wr_hi > ld_hi) ? wr_hi : ld_hi;
    end
    if (cmd_load && !running) begin
      $readmemh("dram_in.hex", dram);
      $readmemh("dram_in.hex", dram_launch);
      if (fd != 0) $fclose(fd);
      fd <= $fopen("trace.txt", "w");
    end
    if (cmd_dump) begin
      $writememh("dram_out.hex", dram, dump_first, dump_last);
      if (fd != 0) $fclose(fd);
      fd <= 0;
    end
  end

  // ---- retire monitor -----------------------------------------------------------------------
  integer m;
  always @(posedge clk) begin
    if (rst) begin
      wd <= 1'b0;
      wd_code <= 8'd0;
      wd_cycles <= 32'd0;
    end else if (running && !wd && fd != 0) begin
      for (m = 0; m < 3; m = m + 1)
        if (ret_valid[m])
          $fwrite(fd, "R %0d %0d %0d %0d %0d %0d %08x\n", m, ret_midx[m*32 +: 32],
                  ret_pidx[m*32 +: 32], ret_op[m*`VTA_HDR_OPCODE_W +: `VTA_HDR_OPCODE_W],
                  ret_start[m*32 +: 32], cyc,
                  ret_digest[m*32 +: 32]);
      if (disp_valid) $fwrite(fd, "D %0d %0d\n", disp_pidx, cyc);
      if (error_now) $fwrite(fd, "E %0d %0d\n", error_code_now, cyc);
      else if (finish_now) $fwrite(fd, "F %0d\n", cyc + 32'd1);
      else if (dl_now) $fwrite(fd, "E 4 %0d %016x\n", cyc - quiet_n, tokens);
      else if (wd_now) $fwrite(fd, "E 2 %0d\n", cyc);
    end
    if (rst) begin
      quiet_n <= 32'd0;
      max_quiet <= 32'd0;
    end else if (running && !wd) begin
      quiet_n <= quiet ? quiet_n + 32'd1 : 32'd0;
      if (quiet && quiet_n + 32'd1 > max_quiet) max_quiet <= quiet_n + 32'd1;
    end
    if (!rst && (wd_now || dl_now) && !wd) begin
      wd <= 1'b1;
      wd_code <= dl_now ? 8'd4 : 8'd2;
      wd_cycles <= cyc + 32'd1;
    end
  end
endmodule
