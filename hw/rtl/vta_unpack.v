// Turns the beats of one transfer into whole elements of EB bits (little-endian: the first beat
// holds byte 0).  Wide elements (EB > BUS) complete on their last beat; narrow ones (EB <= BUS)
// arrive several per beat, and the first and last beat of a transfer may be partial, so each of the
// NS slots carries its own valid flag and element index x within the transfer.
module vta_unpack #(
  parameter EB  = 128,
  parameter BUS = 64,
  parameter LB  = 3,
  parameter NS  = 1      // (EB >= BUS) ? 1 : BUS/EB, given by the instantiating module
) (
  input  wire            clk,
  input  wire            rst,
  input  wire            beat,
  input  wire [BUS-1:0]  data,
  input  wire [31:0]     beat_j,
  input  wire [LB-1:0]   off,     // transfer byte address mod bus bytes
  input  wire [31:0]     nel,     // elements in the transfer
  output wire [NS-1:0]   sv,
  output wire [NS*32-1:0] sx,
  output wire [NS*EB-1:0] sd
);
  generate
    if (EB > BUS) begin : g_wide
      localparam integer PB = EB / BUS;
      wire [31:0] part = beat_j % PB;
      reg [EB-BUS-1:0] partial;
      always @(posedge clk) begin
        if (rst) partial <= {(EB-BUS){1'b0}};
        else if (beat && part != PB - 1) partial[part*BUS +: BUS] <= data;
      end
      assign sv = beat && (part == PB - 1);
      assign sx = beat_j / PB;
      assign sd = beat ? {data, partial} : {EB{1'b0}};   // quiet between own beats (cheap on Icarus)
      wire unused_ok = &{1'b0, off, nel};
    end else begin : g_narrow
      localparam integer Q = BUS / EB;
      localparam integer EBYTES = EB / 8;
      wire [31:0] off_el = {{(32-LB){1'b0}}, off} / EBYTES;
      genvar s;
      for (s = 0; s < NS; s = s + 1) begin : g_slot
        wire [31:0] x = beat_j * Q + s - off_el;
        assign sv[s] = beat && !(beat_j == 32'd0 && s < off_el) && (x < nel);
        assign sx[s*32 +: 32] = x;
        assign sd[s*EB +: EB] = beat ? data[s*EB +: EB] : {EB{1'b0}};
      end
      wire unused_ok = &{1'b0, clk, rst};
    end
  endgenerate
endmodule
