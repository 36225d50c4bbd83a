#[test]
fn every_element_is_in_range() {
    for lo in 0..16u8 {
        for hi in 0..4u8 {
            let v = suite_standin::expand(lo, hi);
            assert!((-32..=31).contains(&v));
        }
    }
}
