package shardcheck

import "math"

// Sampling noise. Hashing K keys into S tables, even a perfect hash does
// not give every table K/S rows: each count is Binomial(K, 1/S), so the
// skew (max − min) / min of a sample is above zero by chance alone. With
// seed 002's threshold of 5 % and the default 8 × 100 tables, 1,000,000
// keys (1,250 per table) show ~17 % skew for a perfect hash: the sample,
// not the hash, decides such a verdict. So a verdict is given only when the
// noise a perfect hash shows at that sample is at most half the threshold;
// a skew above the threshold is then the hash's.

// NoiseSkew is the skew a perfectly uniform hash shows on average with
// sample keys over slots tables: counts are ≈ Normal(μ, σ) with μ = K/S and
// σ = √(μ(1 − 1/S)); the largest of S is ≈ μ + gσ and the smallest
// ≈ μ − gσ, g the expected largest of S standard normals.
func NoiseSkew(slots int, sample int64) float64 {
	if slots <= 1 {
		return 0
	}
	mu := float64(sample) / float64(slots)
	sigma := math.Sqrt(mu * (1 - 1/float64(slots)))
	g := expectedMaxNormal(slots)
	if mu-g*sigma <= 0 {
		return math.Inf(1)
	}
	return 2 * g * sigma / (mu - g*sigma)
}

// KeysForVerdict is the smallest sample at which NoiseSkew is at most
// maxSkew/2, rounded up to two significant digits.
func KeysForVerdict(slots int, maxSkew float64) int64 {
	if slots <= 1 {
		return 1
	}
	// 2gx / (1 − gx) ≤ h with x = σ/μ = √((1 − 1/S)/μ) gives
	// μ ≥ (1 − 1/S) · (g(2 + h) / h)².
	h := maxSkew / 2
	g := expectedMaxNormal(slots)
	mu := (1 - 1/float64(slots)) * math.Pow(g*(2+h)/h, 2)
	return roundUp2(int64(math.Ceil(mu * float64(slots))))
}

// expectedMaxNormal is E[max of n independent standard normals]:
// ∫ x · n φ(x) Φ(x)^(n−1) dx, integrated numerically (n ≤ 2²⁰ keeps the
// integrand inside [−8, 8]).
func expectedMaxNormal(n int) float64 {
	const lo, hi, steps = -8.0, 8.0, 16000
	dx := (hi - lo) / steps
	sum := 0.0
	for i := 0; i <= steps; i++ {
		x := lo + float64(i)*dx
		phi := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
		f := x * float64(n) * phi * math.Pow(cdf, float64(n-1))
		if i == 0 || i == steps {
			f /= 2
		}
		sum += f
	}
	return sum * dx
}

// roundUp2 rounds n up to two significant digits (52,734,113 → 53,000,000).
func roundUp2(n int64) int64 {
	p := int64(1)
	for n/p >= 100 {
		p *= 10
	}
	return (n + p - 1) / p * p
}
