//! Compact codes for stored vectors.
//!
//! A 384-dimension f32 vector is 1.5 KB; the budget for vectors is 0.5 KB per observation. Two
//! codes fit it: an int8 vector with one scale (388 bytes, cosine within about 1% of the f32
//! one) for ranking, and a sign-bit code (48 bytes) whose Hamming distance is a cheap first pass
//! over many rows. Both are computed from L2-normalised vectors.

/// Symmetric int8 quantisation: `v[i] ≈ q[i] as f32 * scale`, with `scale = max|v| / 127`.
///
/// Each component is off by at most `scale / 2`. An all-zero (or empty) vector gives scale 0
/// and zeros; non-finite inputs are the caller's bug and quantise to 0.
pub fn quantize_i8(v: &[f32]) -> (f32, Vec<i8>) {
    let max = v
        .iter()
        .filter(|x| x.is_finite())
        .fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (0.0, vec![0; v.len()]);
    }
    let scale = max / 127.0;
    let q = v
        .iter()
        .map(|&x| {
            if x.is_finite() {
                (x / scale).round().clamp(-127.0, 127.0) as i8
            } else {
                0
            }
        })
        .collect();
    (scale, q)
}

/// The original vector, approximately: `q[i] * scale`.
pub fn dequantize_i8(scale: f32, q: &[i8]) -> Vec<f32> {
    q.iter().map(|&x| x as f32 * scale).collect()
}

/// Integer dot product. Exact for up to 133,000 dimensions (127² per term in an i32).
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

/// Cosine estimate of two L2-normalised vectors from their int8 codes: the dot product of the
/// dequantised vectors, clamped to [-1, 1].
pub fn cosine_i8(a: &[i8], scale_a: f32, b: &[i8], scale_b: f32) -> f32 {
    (dot_i8(a, b) as f32 * scale_a * scale_b).clamp(-1.0, 1.0)
}

/// Sign bits, 64 dimensions per word: bit `i % 64` of word `i / 64` is set when `v[i] > 0`
/// (384 dimensions → 6 words). Unused bits of the last word are 0.
pub fn binary_code(v: &[f32]) -> Vec<u64> {
    let mut code = vec![0u64; v.len().div_ceil(64)];
    for (i, &x) in v.iter().enumerate() {
        if x > 0.0 {
            code[i / 64] |= 1 << (i % 64);
        }
    }
    code
}

/// Number of differing bits between two codes of the same length.
pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn normalised(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n == 0.0 {
            v
        } else {
            v.into_iter().map(|x| x / n).collect()
        }
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn zero_and_empty_vectors() {
        assert_eq!(quantize_i8(&[]), (0.0, vec![]));
        assert_eq!(quantize_i8(&[0.0; 4]), (0.0, vec![0; 4]));
        assert_eq!(binary_code(&[]), Vec::<u64>::new());
        assert_eq!(hamming(&[], &[]), 0);
    }

    #[test]
    fn extremes_map_to_127() {
        let (scale, q) = quantize_i8(&[0.5, -0.25, -0.5, 0.0]);
        assert_eq!(scale, 0.5 / 127.0);
        assert_eq!(q, vec![127, -64, -127, 0]);
    }

    #[test]
    fn binary_code_layout() {
        let mut v = vec![-1.0f32; 384];
        v[0] = 1.0;
        v[63] = 1.0;
        v[64] = 0.5;
        v[383] = 2.0;
        let code = binary_code(&v);
        assert_eq!(code.len(), 6);
        assert_eq!(code[0], 1 | 1 << 63);
        assert_eq!(code[1], 1);
        assert_eq!(code[5], 1 << 63);
        assert_eq!(binary_code(&[1.0; 65]), vec![u64::MAX, 1]);
    }

    #[test]
    fn cosine_of_a_vector_with_itself_is_about_one() {
        let v = normalised(
            (0..384)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect(),
        );
        let (s, q) = quantize_i8(&v);
        assert!((cosine_i8(&q, s, &q, s) - 1.0).abs() < 0.01);
    }

    proptest! {
        #[test]
        fn quantisation_error_is_at_most_half_a_step(v in prop::collection::vec(-10.0f32..10.0, 0..400)) {
            let (scale, q) = quantize_i8(&v);
            let back = dequantize_i8(scale, &q);
            for (x, y) in v.iter().zip(&back) {
                prop_assert!((x - y).abs() <= scale * 0.5 + scale * 1e-3 + 1e-9, "{x} vs {y}, scale {scale}");
            }
        }

        #[test]
        fn dot_i8_is_the_integer_dot(pairs in prop::collection::vec((any::<i8>(), any::<i8>()), 0..400)) {
            let (a, b): (Vec<i8>, Vec<i8>) = pairs.into_iter().unzip();
            let expected: i64 = a.iter().zip(&b).map(|(&x, &y)| x as i64 * y as i64).sum();
            prop_assert_eq!(dot_i8(&a, &b) as i64, expected);
            prop_assert_eq!(dot_i8(&a, &b), dot_i8(&b, &a));
        }

        #[test]
        fn cosine_estimate_is_close(
            a in prop::collection::vec(-1.0f32..1.0, 384),
            b in prop::collection::vec(-1.0f32..1.0, 384),
        ) {
            let (a, b) = (normalised(a), normalised(b));
            let (sa, qa) = quantize_i8(&a);
            let (sb, qb) = quantize_i8(&b);
            // |Δdot| ≤ |a||e_b| + |b||e_a| + |e_a||e_b|, with |e| ≤ sqrt(n) * scale / 2.
            let (ea, eb) = (19.6 * sa / 2.0, 19.6 * sb / 2.0);
            let bound = ea + eb + ea * eb + 1e-4;
            let estimate = cosine_i8(&qa, sa, &qb, sb);
            prop_assert!((estimate - dot(&a, &b)).abs() <= bound, "{estimate} vs {}", dot(&a, &b));
        }

        #[test]
        fn hamming_is_a_metric(
            a in prop::collection::vec(-1.0f32..1.0, 384),
            b in prop::collection::vec(-1.0f32..1.0, 384),
            c in prop::collection::vec(-1.0f32..1.0, 384),
        ) {
            let (a, b, c) = (binary_code(&a), binary_code(&b), binary_code(&c));
            prop_assert_eq!(a.len(), 6);
            prop_assert_eq!(hamming(&a, &a), 0);
            prop_assert_eq!(hamming(&a, &b), hamming(&b, &a));
            prop_assert!(hamming(&a, &b) <= 384);
            prop_assert!(hamming(&a, &c) <= hamming(&a, &b) + hamming(&b, &c));
        }

        #[test]
        fn negation_flips_every_nonzero_sign(v in prop::collection::vec(prop_oneof![-1.0f32..-1e-6, 1e-6f32..1.0], 1..200)) {
            let neg: Vec<f32> = v.iter().map(|x| -x).collect();
            prop_assert_eq!(hamming(&binary_code(&v), &binary_code(&neg)), v.len() as u32);
        }
    }
}
