`include "vta_params.vh"
// One memory client's burst sequencer (docs/timing.md 4.1): a set of `nrows` transfers of
// `row_bytes` bytes, row r at byte address base + r*stride, each split into bursts that never cross
// a BURST_BEATS-word boundary.  `start` in cycle t makes the first request visible at t+1; every
// further request is issued in the cycle the previous burst completes; `done` pulses in the cycle
// the last burst completes.  `beat_j` numbers the beats of the current transfer, `row` the transfer.
module vta_dma_seq #(
  parameter LB = 3,   // log2(bus bytes)
  parameter LK = 4    // log2(BURST_BEATS)
) (
  input  wire        clk,
  input  wire        rst,
  input  wire        start,
  input  wire [31:0] base,
  input  wire [31:0] row_bytes,
  input  wire [31:0] stride,
  input  wire [`VTA_MEM_Y_SIZE_W-1:0] nrows,   // >= 1 (a y_size field)
  output reg         req,
  output wire [31:0] req_addr,
  output wire [8:0]  req_beats,
  input  wire        grant,
  input  wire        cmpl_next,
  input  wire        beat,
  output reg  [31:0] beat_j,
  output reg  [`VTA_MEM_Y_SIZE_W-1:0] row,
  output wire [LB-1:0] row_off,   // byte address of the current transfer mod bus bytes
  output reg         done
);
  reg [31:0] rbytes, rstride, row_addr;
  assign row_off = row_addr[LB-1:0];
  localparam integer RW = `VTA_MEM_Y_SIZE_W;
  localparam [RW-1:0] R0 = {RW{1'b0}};
  localparam [RW-1:0] R1 = {{(RW-1){1'b0}}, 1'b1};
  reg [RW-1:0] rows_left;
  reg [32:0] cur_w, end_w;        // word addresses (33 bits: a transfer may end at 2^32)

  // word range of a transfer starting at byte a
  function [32:0] first_word;
    input [31:0] a;
    begin
      first_word = {1'b0, a} >> LB;
    end
  endfunction
  function [32:0] last_word;      // exclusive
    input [31:0] a;
    input [31:0] n;
    reg [33:0] e;
    begin
      e = {2'b0, a} + {2'b0, n} + ((34'd1 << LB) - 34'd1);
      e = e >> LB;
      last_word = e[32:0];
    end
  endfunction

  wire [32:0] bound = (cur_w | ((33'd1 << LK) - 33'd1)) + 33'd1;
  wire [32:0] stop  = (bound < end_w) ? bound : end_w;
  wire [8:0]  nb    = stop[8:0] - cur_w[8:0];   // <= BURST_BEATS <= 256
  assign req_addr  = cur_w[31:0];
  assign req_beats = nb;

  wire [31:0] next_row_addr = row_addr + rstride;

  always @(posedge clk) begin
    if (rst) begin
      req <= 1'b0;
      done <= 1'b0;
      beat_j <= 32'd0;
      row <= R0;
      row_addr <= 32'd0;
      rbytes <= 32'd0;
      rstride <= 32'd0;
      rows_left <= R0;
      cur_w <= 33'd0;
      end_w <= 33'd0;
    end else begin
      done <= 1'b0;
      if (beat) beat_j <= beat_j + 32'd1;
      if (grant) begin
        req <= 1'b0;
        cur_w <= stop;
      end
      if (start) begin
        req <= 1'b1;
        beat_j <= 32'd0;
        row <= R0;
        row_addr <= base;
        rbytes <= row_bytes;
        rstride <= stride;
        rows_left <= nrows;
        cur_w <= first_word(base);
        end_w <= last_word(base, row_bytes);
      end else if (cmpl_next) begin
        if (cur_w != end_w) begin
          req <= 1'b1;
        end else if (rows_left > R1) begin
          req <= 1'b1;
          beat_j <= 32'd0;
          row <= row + R1;
          rows_left <= rows_left - R1;
          row_addr <= next_row_addr;
          cur_w <= first_word(next_row_addr);
          end_w <= last_word(next_row_addr, rbytes);
        end else begin
          rows_left <= R0;
          done <= 1'b1;
        end
      end
    end
  end
endmodule
