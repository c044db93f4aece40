// Plain-Verilog driver of tb_top for the cocotb-free bring-up harness (tests/rtl/icarus_harness.py):
// the same sequence as sim/rtl/tb_batch.py (reset, cmd_load, launch, wait for done, cmd_dump)
// with the job given as plusargs: +insn_addr= +insn_count= +max_cycles= +dump_last=
`timescale 1ns / 1ps
module tb_drive;
  reg        clk = 1'b0;
  reg        rst = 1'b1;
  reg        launch = 1'b0;
  reg        cmd_load = 1'b0;
  reg        cmd_dump = 1'b0;
  reg [31:0] insn_addr, insn_count, max_cycles, dump_last;
  wire       done, finish, error;
  wire [7:0] error_code;
  wire [31:0] cycles;

  tb_top dut (.clk(clk), .rst(rst), .launch(launch), .insn_addr(insn_addr),
    .insn_count(insn_count), .max_cycles(max_cycles), .cmd_load(cmd_load), .cmd_dump(cmd_dump),
    .dump_first(32'd0), .dump_last(dump_last), .done(done), .finish(finish), .error(error),
    .error_code(error_code), .cycles(cycles));

  always #5 clk = !clk;

  initial begin
    if (!$value$plusargs("insn_addr=%d", insn_addr)) insn_addr = 32'd0;
    if (!$value$plusargs("insn_count=%d", insn_count)) insn_count = 32'd0;
    if (!$value$plusargs("max_cycles=%d", max_cycles)) max_cycles = 32'd1000000;
    if (!$value$plusargs("dump_last=%d", dump_last)) dump_last = 32'd0;
    @(negedge clk); @(negedge clk); @(negedge clk);
    rst = 1'b0;
    @(negedge clk);
    cmd_load = 1'b1;
    @(negedge clk);
    cmd_load = 1'b0;
    @(negedge clk);
    launch = 1'b1;
    while (!done) @(negedge clk);
    $display("STATUS finish=%0d error=%0d error_code=%0d cycles=%0d", finish, error, error_code, cycles);
    launch = 1'b0;
    cmd_dump = 1'b1;
    @(negedge clk);
    cmd_dump = 1'b0;
    @(negedge clk);
    $finish;
  end
endmodule
