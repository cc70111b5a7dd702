package algo

import (
	"testing"

	"pgregory.net/rapid"
)

func TestDividerMatchesDivision(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.OneOf(rapid.Int64Range(1, 1000), rapid.Int64Range(1, maxUnits)).Draw(t, "d")
		n := rapid.OneOf(
			rapid.Int64Range(0, 1<<dividendBits-1),
			rapid.Int64Range(0, 3*d),
			rapid.Just(int64(1<<dividendBits-1)),
		).Draw(t, "n")
		v := newDivider(d)
		if q, r := v.divMod(n); q != n/d || r != n%d {
			t.Fatalf("%d / %d: got %d rem %d, want %d rem %d", n, d, q, r, n/d, n%d)
		}
	})
}

func TestDividerAtPowersOfTwo(t *testing.T) {
	for e := 0; e <= 50; e++ {
		for _, d := range []int64{1<<e - 1, 1 << e, 1<<e + 1} {
			if d < 1 {
				continue
			}
			v := newDivider(d)
			for _, n := range []int64{0, 1, d - 1, d, d + 1, 1<<dividendBits - 1, 1<<dividendBits - d} {
				if n < 0 {
					continue
				}
				if got := v.div(n); got != n/d {
					t.Fatalf("%d / %d = %d, want %d", n, d, got, n/d)
				}
			}
		}
	}
}

func TestMulDiv(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64Range(0, maxUnits).Draw(t, "a")
		c := rapid.Int64Range(1, maxUnits).Draw(t, "c")
		b := rapid.Int64Range(0, c).Draw(t, "b")
		floor, ceil := mulDivFloor(a, b, c), mulDivCeil(a, b, c)
		// Check against the definition with the product split in two halves.
		if floor < 0 || floor > a || ceil-floor > 1 {
			t.Fatalf("mulDiv(%d, %d, %d) = %d, %d", a, b, c, floor, ceil)
		}
		if c <= 1<<31 && a <= 1<<31 && b <= 1<<31 {
			if want := a * b / c; floor != want {
				t.Fatalf("floor(%d·%d/%d) = %d, want %d", a, b, c, floor, want)
			}
		}
	})
}
