// vtasim's main loop for a Verilator build of tb_top (the "loop" clock, sim/rtl/runner.py).
//
// It takes the place of cocotb's generic Verilator main: the same VPI regions in the same order
// (start of simulation, evaluation with value-change callbacks until nothing more is needed,
// read-write, read-only, next-time, timed callbacks), but the clock is made here instead of by a
// `--timing` delay in the HDL or by a cocotb Clock: `clk` is high at time 0 and toggles every half
// period (VTASIM_CLOCK_HALF_NS, in ns), like tb_top's own clock and cocotb's Clock.
//
// While a job runs, the testbench needs nothing per cycle: sim/rtl/tb_batch.py raises `launch` and
// then waits for one thing only, the rising edge of `done` (the DRAM model, the retire monitor and
// the watchdog are HDL).  So while `launch` is high, `done` low, and cocotb holds no callback of
// another kind (no read-write, read-only, next-time or timed callback), the loop runs the clock
// alone: toggle, evaluate, dump the waves, no VPI at all.  The edge on which `done` rises (or a
// timed callback's time, or $finish) hands the time step back to the full VPI protocol, so cocotb
// sees the rise of `done` at the same time as in a run that evaluated every step through VPI.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"

#ifndef VTASIM_CLOCK_HALF_NS
#error "VTASIM_CLOCK_HALF_NS (the half clock period in ns) must be defined"
#endif

#ifndef VM_TRACE_FST
#define VM_TRACE_FST 0
#endif
#if VM_TRACE
#if VM_TRACE_FST
#include <verilated_fst_c.h>
typedef VerilatedFstC WaveFile;
#else
#include <verilated_vcd_c.h>
typedef VerilatedVcdC WaveFile;
#endif
static WaveFile* waves = nullptr;
#endif

static uint64_t now = 0;   // simulation time in the design's time precision

double sc_time_stamp() { return static_cast<double>(now); }

extern "C" void vlog_startup_routines_bootstrap(void);

namespace {

// Value-change callbacks can change values again: call them until none fires.
void settle() {
    while (VerilatedVpi::callValueCbs()) {
    }
}

// The evaluation regions of one time step, then its end and the read-only region.
void full_step(Vtop* top) {
    do {
        do {
            top->eval_step();
            VerilatedVpi::clearEvalNeeded();
            VerilatedVpi::doInertialPuts();
            settle();
        } while (VerilatedVpi::evalNeeded());
        VerilatedVpi::callCbs(cbReadWriteSynch);
        VerilatedVpi::doInertialPuts();
        settle();
    } while (VerilatedVpi::evalNeeded());
    top->eval_end_step();
    VerilatedVpi::callCbs(cbReadOnlySynch);
#if VM_TRACE
    if (waves) waves->dump(now);
#endif
}

// True while a job runs and cocotb waits for nothing but a value change (tb_batch: `done`).
bool clock_alone(const Vtop* top) {
    return top->launch && !top->done && !top->rst && !VerilatedVpi::hasCbs(cbReadWriteSynch) &&
           !VerilatedVpi::hasCbs(cbReadOnlySynch) && !VerilatedVpi::hasCbs(cbNextSimTime) &&
           !VerilatedVpi::hasCbs(cbAfterDelay);
}

// Once: at $finish (Verilator's exit callback) or at the end of main, whichever comes first.
void wrap_up() {
    static bool done = false;
    if (done) return;
    done = true;
    VerilatedVpi::callCbs(cbEndOfSimulation);
#if VM_TRACE
    if (waves) waves->close();
#endif
#if VM_COVERAGE
    VerilatedCov::write();   // +verilator+coverage+file+<path>
#endif
}

uint64_t half_period_ticks() {
    // the design's time precision is 10^p s (p = -12 for 1 ps): VTASIM_CLOCK_HALF_NS ns in it
    uint64_t ticks = VTASIM_CLOCK_HALF_NS;
    for (int p = Verilated::threadContextp()->timeprecision(); p < -9; ++p) ticks *= 10;
    return ticks;
}

}  // namespace

int main(int argc, char** argv) {
    const char* wave_path = VM_TRACE_FST ? "dump.fst" : "dump.vcd";
    bool trace = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg(argv[i]);
        if (arg == "--trace") {
            trace = true;
        } else if (arg == "--trace-file" && i + 1 < argc) {
            wave_path = argv[++i];
        }
    }
#if !VM_TRACE
    if (trace) {
        std::fprintf(stderr, "vtasim: --trace needs a build with tracing compiled in\n");
        return 2;
    }
#endif
    Verilated::commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);
#if VM_TRACE
    Verilated::traceEverOn(true);
    if (trace) {
        waves = new WaveFile;
        top->trace(waves, 99);
        waves->open(wave_path);
    }
#endif
    const uint64_t half = half_period_ticks();
    uint64_t next_edge = half;
    top->clk = 1;

    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void*) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle();

    while (!Verilated::gotFinish()) {
        full_step(top.get());
        if (Verilated::gotFinish()) break;
        if (clock_alone(top.get())) {
            // Nothing cocotb waits for can happen before `done` rises or a timed callback is due.
            const uint64_t deadline = VerilatedVpi::cbNextDeadline();
            bool handed_back = false;
            while (next_edge < deadline) {
                now = next_edge;
                next_edge += half;
                top->clk = !top->clk;
                top->eval_step();
                if (top->done || Verilated::gotFinish()) {
                    handed_back = true;   // this step's VPI regions run in full_step
                    break;
                }
                top->eval_end_step();
#if VM_TRACE
                if (waves) waves->dump(now);
#endif
            }
            if (handed_back) continue;
        }
        now = std::min(next_edge, VerilatedVpi::cbNextDeadline());
        if (now == next_edge) {
            next_edge += half;
            top->clk = !top->clk;
        }
        VerilatedVpi::callCbs(cbNextSimTime);
        settle();
        VerilatedVpi::callTimedCbs();
        settle();
    }
    top->final();
    wrap_up();
    return Verilated::threadContextp()->errorCount() > 0 ? 1 : 0;
}
