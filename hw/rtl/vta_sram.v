// On-chip buffer: NW write slots, NR combinational read ports, cleared by reset.
// Several write slots exist because one bus beat can carry several narrow elements (4.1 of
// docs/timing.md); clearing on reset makes every launch start from the same state as the models.
module vta_sram #(
  parameter W  = 32,
  parameter AW = 10,
  parameter NW = 1,
  parameter NR = 1
) (
  input  wire             clk,
  input  wire             rst,
  input  wire [NW-1:0]    we,
  input  wire [NW*AW-1:0] wa,
  input  wire [NW*W-1:0]  wd,
  input  wire [NR*AW-1:0] ra,
  output wire [NR*W-1:0]  rd
);
  localparam integer DEPTH = 1 << AW;
  reg [W-1:0] mem [0:DEPTH-1];
  integer i;

  always @(posedge clk) begin
    if (rst) begin
      for (i = 0; i < DEPTH; i = i + 1) mem[i] <= {W{1'b0}};
    end else begin
      for (i = 0; i < NW; i = i + 1)
        if (we[i]) mem[wa[i*AW +: AW]] <= wd[i*W +: W];
    end
  end

  genvar r;
  generate
    for (r = 0; r < NR; r = r + 1) begin : g_rd
      assign rd[r*W +: W] = mem[ra[r*AW +: AW]];
    end
  endgenerate
endmodule
