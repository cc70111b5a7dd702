package algo

import "math/bits"

// floorDiv is a/b rounded towards negative infinity (b > 0), so that window
// starts stay aligned for times before the epoch too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv is a/b rounded up, for a ≥ 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}

// mulDivFloor returns ⌊a·b/c⌋ for a, b ≥ 0 and c > 0 without overflow in the
// product. Callers guarantee that the quotient fits in an int64.
func mulDivFloor(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) { // quotient would not fit: saturate instead of panicking
		return maxUnits
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// mulDivCeil returns ⌈a·b/c⌉ for a, b ≥ 0 and c > 0.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return maxUnits
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(q)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
