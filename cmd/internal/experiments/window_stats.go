package experiments

// maxInAnyPeriod returns the largest number of the ascending times that fall
// in one interval (t − period, t], over every t: the most a limiter let
// through in any stretch of one period, wherever it starts.
func maxInAnyPeriod(times []int64, period int64) int64 {
	var best int64
	left := 0
	for right, t := range times {
		for times[left] <= t-period {
			left++
		}
		best = max(best, int64(right-left+1))
	}
	return best
}

// perWindow counts the ascending times in each aligned window
// [start + k·period, start + (k+1)·period), k = 0 … windows−1; times outside
// are ignored.
func perWindow(times []int64, start, period int64, windows int) []int64 {
	counts := make([]int64, windows)
	for _, t := range times {
		if t < start {
			continue
		}
		k := (t - start) / period
		if k >= int64(windows) {
			break
		}
		counts[k]++
	}
	return counts
}

// trailingCounts samples, at each of the times at, how many of the ascending
// times fall in (at − period, at].
func trailingCounts(times []int64, at []int64, period int64) []int64 {
	out := make([]int64, len(at))
	left, right := 0, 0
	for i, t := range at {
		for right < len(times) && times[right] <= t {
			right++
		}
		for left < right && times[left] <= t-period {
			left++
		}
		out[i] = int64(right - left)
	}
	return out
}

// alignedStart returns the start of the window of length period that holds
// traceStart: windows are aligned to multiples of the period since the
// epoch, so experiments that count true windows start on one.
func alignedStart(period int64) int64 { return traceStart - traceStart%period }
