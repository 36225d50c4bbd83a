/// Expands a q6_K element the seed's way: `(lo | hi << 4) - 32`.
///
/// ```
/// assert_eq!(suite_standin::expand(15, 3), 31);
/// ```
pub fn expand(lo: u8, hi: u8) -> i32 {
    ((lo & 0xF) as i32 | (((hi & 3) as i32) << 4)) - 32
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn centred_low_end() {
        assert_eq!(expand(0, 0), -32);
    }

    #[test]
    fn centred_high_end() {
        assert_eq!(expand(15, 3), 31);
    }

    #[test]
    fn sensitive_to_a_co_tenant() {
        // the planted failure: set SUITE_STANDIN_FAIL=1
        assert!(std::env::var("SUITE_STANDIN_FAIL").as_deref() != Ok("1"), "planted failure");
    }

    #[test]
    #[ignore]
    fn needs_a_gpu() {}
}
