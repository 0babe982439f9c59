//! The storage figure of issue 3: 10,000 observations of an unchanged
//! 50-tool server add at most 200 bytes each to the database file. The
//! test prints the exact figure and asserts a generous 400, since it
//! measures file size (pages), not time.

mod support;

#[test]
fn unchanged_observations_cost_a_row_not_a_copy() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let m = support::measure_unchanged_observations(dir.path(), 10_000).expect("measured");
    let per = m.bytes_per_observation();
    println!(
        "{} observations of an unchanged 50-tool server: {} bytes after the first, {} after all: \
         {per:.1} bytes per observation",
        m.observations, m.bytes_after_first, m.bytes_after_all
    );
    assert!(per <= 400.0, "{per:.1} bytes per observation");
    // All 50 tools' content is in the file after the first observation.
    assert!(m.bytes_after_first > 50_000, "{m:?}");
}
