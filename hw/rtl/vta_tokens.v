`include "vta_params.vh"
// The four dependency token counters (docs/timing.md 5).  Pops happen at an instruction's start,
// pushes at its end; both become visible in the next cycle.  A push that leaves a counter above
// TOKEN_QUEUE_DEPTH (counted after the same cycle's pop) raises `overflow` in that cycle.
module vta_tokens (
  input  wire        clk,
  input  wire        rst,
  input  wire [3:0]  pop,       // l2g, g2l, s2g, g2s
  input  wire [3:0]  push,
  output wire [3:0]  avail,     // counter > 0
  output wire        overflow,
  output wire [63:0] value      // 4 x 16 bits, l2g in the low bits
);
  localparam [16:0] DEPTH = `VTA_TOKEN_QUEUE_DEPTH;
  wire [3:0] ovf;
  genvar t;
  generate
    for (t = 0; t < 4; t = t + 1) begin : g_tok
      reg  [16:0] cnt;
      wire [16:0] nxt = cnt + {16'd0, push[t]} - {16'd0, pop[t]};
      assign avail[t] = (cnt != 17'd0);
      assign ovf[t] = push[t] && (nxt > DEPTH);
      assign value[t*16 +: 16] = cnt[15:0];
      always @(posedge clk) begin
        if (rst) cnt <= 17'd0;
        else cnt <= nxt;
      end
    end
  endgenerate
  assign overflow = |ovf;
endmodule
