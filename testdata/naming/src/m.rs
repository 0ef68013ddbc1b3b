// m.rs — allocations through Rust's std for faultline's live Rust test
// and Strings.
use std::collections::HashMap;

#[inline(never)]
fn build(n: usize) -> Vec<u64> {
    let mut v = Vec::new();
    for i in 0..n {
        v.push(i as u64 * 3);
    }
    v
}

#[inline(never)]
fn index(n: usize) -> HashMap<u64, String> {
    let mut m = HashMap::new();
    for i in 0..n {
        m.insert(i as u64, format!("value number {i:08}"));
    }
    m
}

fn main() {
    let v = build(1 << 20);
    let m = index(20000);
    println!("{} {}", v[v.len() - 1], m.len());
}
