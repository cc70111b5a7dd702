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

// divider divides by a constant without a division instruction: a 64-bit
// IDIV costs tens of cycles, a multiplication a few. It is exact for every
// dividend in [0, 2^53), which covers every quantity this package forms (see
// maxUnits), by the Granlund–Montgomery bound: with l = ⌈log2 d⌉ and
// m = ⌈2^(53+l)/d⌉, ⌊n·m / 2^(53+l)⌋ = ⌊n/d⌋ for all n < 2^53.
type divider struct {
	d     int64
	m     uint64
	shift uint // 53 + l, at most 103
}

const dividendBits = 53

func newDivider(d int64) divider {
	l := uint(bits.Len64(uint64(d - 1)))
	shift := dividendBits + l
	var hi, lo uint64
	if shift >= 64 {
		hi = 1 << (shift - 64)
	} else {
		lo = 1 << shift
	}
	q, r := bits.Div64(hi, lo, uint64(d)) // hi < d since 2^(l-11) < d
	if r != 0 {
		q++
	}
	return divider{d: d, m: q, shift: shift}
}

// floor returns ⌊n/d⌋ for any n: the fast path for [0, 2^53), floorDiv
// outside it.
func (v divider) floor(n int64) int64 {
	if uint64(n) >= 1<<dividendBits {
		return floorDiv(n, v.d)
	}
	return v.div(n)
}

// ceil returns ⌈n/d⌉ for n ≥ 0.
func (v divider) ceil(n int64) int64 {
	if uint64(n) >= 1<<dividendBits {
		return ceilDiv(n, v.d)
	}
	q, r := v.divMod(n)
	if r != 0 {
		q++
	}
	return q
}

// div returns ⌊n/d⌋ for 0 ≤ n < 2^53.
func (v divider) div(n int64) int64 {
	hi, lo := bits.Mul64(uint64(n), v.m)
	if v.shift >= 64 {
		return int64(hi >> (v.shift - 64))
	}
	return int64(hi<<(64-v.shift) | lo>>v.shift)
}

// divMod returns ⌊n/d⌋ and n mod d for 0 ≤ n < 2^53.
func (v divider) divMod(n int64) (q, r int64) {
	q = v.div(n)
	return q, n - q*v.d
}
