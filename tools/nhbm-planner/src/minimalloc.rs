//! Instances in MiniMalloc's CSV format (google/minimalloc, the solver
//! the planner is compared with): a header, then one buffer a line, `id,
//! lower, upper, size`, live from time `lower` up to `upper` (exclusive),
//! `size` bytes. Its older header `buffer,start,end,size` reads the same.
//! Traces from compilers (idealloc's IOPDDL and SOMAS instances) come in
//! the same format with sizes in bytes.

use std::path::PathBuf;

use crate::desc::{live_over, ModelDesc, OperatorDesc, TensorDesc};
use crate::Model;

/// Every size of MiniMalloc's benchmark instances is a multiple of it: the
/// largest alignment the model is given.
pub const UNIT: u64 = 1024;

/// The alignment an instance's buffers are given: the largest power of
/// two up to [`UNIT`] that divides every size, which no canonical packing
/// (offsets are sums of sizes) is held back by.
fn alignment(sizes: impl Iterator<Item = u64>) -> u64 {
    let common = sizes.fold(UNIT, |a, s| a.min(1 << s.trailing_zeros().min(63)));
    common.max(1)
}

/// The header fields of `text`'s first non-empty line.
fn header(text: &str) -> Option<Vec<&str>> {
    let line = text.lines().find(|l| !l.trim().is_empty())?;
    Some(line.split(',').map(str::trim).collect())
}

/// Whether `text` starts with one of the format's headers (what a file
/// holds, before it is read).
pub fn is_instance(text: &str) -> bool {
    header(text).is_some_and(|h| {
        h == ["id", "lower", "upper", "size"] || h == ["buffer", "start", "end", "size"]
    })
}

/// The instance in `text` as a model named `name`: one scratch tensor per
/// buffer, in one unlimited memory; the times that start or end a buffer,
/// in order, are its operators (a packing of one is a packing of the
/// other). Every buffer is aligned as [`UNIT`] or the sizes allow.
pub fn read(name: &str, text: &str) -> Result<Model, String> {
    read_with_times(name, text).map(|(m, _)| m)
}

/// [`read`], and the times that start or end a buffer, in order: operator
/// `t` of the model is the time from `times[t]` up to `times[t + 1]`, so
/// a buffer of operators `a..=b` lives from `times[a]` up to
/// `times[b + 1]`, as in the file.
pub fn read_with_times(name: &str, text: &str) -> Result<(Model, Vec<u64>), String> {
    if !is_instance(text) {
        return Err(format!(
            "unknown header {:?}",
            header(text).unwrap_or_default()
        ));
    }
    let lines = text.lines().filter(|l| !l.trim().is_empty()).skip(1);
    let mut bufs = Vec::new();
    for line in lines {
        let f: Vec<u64> = line
            .split(',')
            .map(|x| x.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{line:?}: {e}"))?;
        let [id, lower, upper, size] = f[..] else {
            return Err(format!("{line:?}: four fields wanted"));
        };
        if lower >= upper || size == 0 {
            return Err(format!("{line:?}: an empty lifetime or size"));
        }
        bufs.push((id, lower, upper, size));
    }
    let mut points: Vec<u64> = bufs.iter().flat_map(|b| [b.1, b.2]).collect();
    points.sort_unstable();
    points.dedup();
    let at = |t: u64| points.partition_point(|&p| p < t);
    let mut operators: Vec<OperatorDesc> = (0..points.len().saturating_sub(1))
        .map(|t| OperatorDesc {
            duration: Some(points[t + 1] - points[t]),
            ..OperatorDesc::new(format!("t{}", points[t]), Vec::new(), Vec::new())
        })
        .collect();
    let mut tensors = Vec::with_capacity(bufs.len());
    for &(id, lower, upper, size) in &bufs {
        let tid = format!("b{id}");
        live_over(&mut operators, &tid, at(lower), at(upper) - 1);
        tensors.push(TensorDesc::scratch(tid, size));
    }
    let align = alignment(bufs.iter().map(|b| b.3));
    let desc = ModelDesc::scratch_only(name, align, tensors, operators);
    let m = Model::new(desc, PathBuf::from(".")).map_err(|e| e.to_string())?;
    Ok((m, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_become_operators() {
        let m = read(
            "t",
            "id,lower,upper,size\n0,0,10,2048\n1,10,30,1024\n2,5,30,3072\n",
        )
        .unwrap();
        let lt = |i: usize| {
            let l = m.tensors[i].lifetime.as_ref().unwrap();
            (l.start_op, l.end_op)
        };
        // Points 0 5 10 30: operators 0..3.
        assert_eq!(m.desc.operators.len(), 3);
        assert_eq!([lt(0), lt(1), lt(2)], [(0, 1), (2, 2), (1, 2)]);
        assert_eq!(m.liveness_lower_bound(), 5120);
        let (_, times) = read_with_times(
            "t",
            "id,lower,upper,size\n0,0,10,2048\n1,10,30,1024\n2,5,30,3072\n",
        )
        .unwrap();
        assert_eq!(times, [0, 5, 10, 30]);
        // The operators take the times between: exact weighs lifetimes in
        // them.
        assert_eq!(m.operator_times(), times);
        let old = read("t", "buffer,start,end,size\n0,0,10,2048\n").unwrap();
        assert_eq!(old.tensors.len(), 1);
        assert!(read("t", "a,b\n").is_err());
        assert!(read("t", "").is_err());
        assert!(is_instance("\nid, lower, upper, size\n") && !is_instance("{\"tensors\": []}"));
        assert!(read("t", "id,lower,upper,size\n0,3,3,1024\n").is_err());
        assert!(read("t", "id,lower,upper,size\n0,0,3,0\n").is_err());
        assert_eq!(m.tensors[0].alignment, UNIT);
        // Sizes in bytes: aligned as the sizes allow.
        let odd = read("t", "id,lower,upper,size\n0,0,3,100\n1,1,2,4096\n").unwrap();
        assert_eq!(odd.tensors[0].alignment, 4);
        let odd = read("t", "id,lower,upper,size\n0,0,3,4097\n").unwrap();
        assert_eq!(odd.tensors[0].alignment, 1);
    }
}
