// Package experiments holds the measurements of Floodgate's algorithms that
// need no cluster, and the plotting helper every experiment draws with:
//
//   - [SlidingAccuracy]: how often the sliding window counter (two counters,
//     the previous one weighted by overlap) decides differently from the exact
//     sliding log, on a synthetic trace of many heavy-tailed, bursty sources.
//   - [BoundaryBurst]: the fixed window's 2× burst across a window boundary,
//     next to the algorithms that do not have it.
//   - [ClockSkew]: what skew between the clocks of N nodes, each enforcing its
//     share of a limit in windows aligned to its own clock, does to the count
//     admitted in a true window.
//   - [Chart] and [LinePlot]: deterministic PNG line plots on gonum.org/v1/plot,
//     drawn only in a build with -tags plots (gonum's plot package links
//     every back end it has, PDF and SVG included); without it WritePNG
//     returns ErrNoPlots.
//
// Everything runs the real decision code of internal/algo on virtual time:
// no sleeps, no clocks read, and a seed makes every run reproducible.
package experiments
