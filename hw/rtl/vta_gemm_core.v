`include "vta_params.vh"
// One GEMM micro-op on a whole tile (hardware spec 3.4): for every batch row b and output o,
// acc[b][o] + sum_k int8(inp[b][k]) * int8(wgt[o][k]), wrapped to 32 bits.
/* verilator tracing_off */
module vta_gemm_core (
  input  wire                          en,       // a GEMM uop issues: otherwise skip the MACs
  input  wire [`VTA_ACC_ELEM_BITS-1:0] acc_in,
  input  wire [`VTA_INP_ELEM_BITS-1:0] inp,
  input  wire [`VTA_WGT_ELEM_BITS-1:0] wgt,
  output reg  [`VTA_ACC_ELEM_BITS-1:0] acc_out
);
  localparam integer NB = `VTA_BATCH;
  localparam integer NI = `VTA_BLOCK_IN;
  localparam integer NO = `VTA_BLOCK_OUT;
  localparam integer IW = `VTA_INP_WIDTH;
  localparam integer WW = `VTA_WGT_WIDTH;
  localparam integer AW = `VTA_ACC_WIDTH;
  integer b, o, k;
  reg signed [AW-1:0] dot;
  reg signed [IW-1:0] a;
  reg signed [WW-1:0] w;
  always @* begin
    acc_out = acc_in;
    dot = {AW{1'b0}};
    a = {IW{1'b0}};
    w = {WW{1'b0}};
    if (en) for (b = 0; b < NB; b = b + 1) begin
      for (o = 0; o < NO; o = o + 1) begin
        dot = acc_in[(b*NO + o)*AW +: AW];
        for (k = 0; k < NI; k = k + 1) begin
          a = inp[(b*NI + k)*IW +: IW];
          w = wgt[(o*NI + k)*WW +: WW];
          dot = dot + a * w;      // signed, at AW bits: the exact product, sign-extended
        end
        acc_out[(b*NO + o)*AW +: AW] = dot;
      end
    end
  end
endmodule
