//! The drm-usage-stats keys neuron_hbm prints in an open file's
//! `/proc/PID/fdinfo/FD` (Documentation/uapi.rst, "fdinfo").

/// What one open file's fdinfo says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileUsage {
    /// `drm-client-id`: the open file, shared by its duplicates.
    pub client_id: u64,
    /// `drm-total-hbmN`, in bytes, indexed by N.
    pub hbm_bytes: Vec<u64>,
}

/// The usage in `text`, an fdinfo file; `None` unless its `drm-driver`
/// is neuron_hbm.
pub fn parse(text: &str) -> Option<FileUsage> {
    let mut ours = false;
    let mut u = FileUsage::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if key == "drm-driver" {
            ours = value == "neuron_hbm";
        } else if key == "drm-client-id" {
            u.client_id = value.parse().ok()?;
        } else if let Some(n) = key.strip_prefix("drm-total-hbm") {
            let n: usize = n.parse().ok()?;
            if u.hbm_bytes.len() <= n {
                u.hbm_bytes.resize(n + 1, 0);
            }
            u.hbm_bytes[n] = size(value)?;
        }
    }
    ours.then_some(u)
}

/// A drm-usage-stats size: a number, then nothing, `KiB` or `MiB`.
fn size(v: &str) -> Option<u64> {
    let (n, shift) = match v.split_once(' ') {
        None => (v, 0),
        Some((n, "KiB")) => (n, 10),
        Some((n, "MiB")) => (n, 20),
        Some(_) => return None,
    };
    n.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_neuron_hbm_file_gives_its_client_and_channels() {
        let text = "pos:\t0\nflags:\t02\nmnt_id:\t20\nino:\t7\n\
                    drm-driver:\tneuron_hbm\ndrm-client-id:\t42\ndrm-pdev:\t0000:00:04.0\n\
                    drm-total-hbm0:\t3 MiB\ndrm-resident-hbm0:\t3 MiB\n\
                    drm-total-hbm1:\t5 KiB\ndrm-resident-hbm1:\t5 KiB\n\
                    drm-total-hbm2:\t1025\ndrm-resident-hbm2:\t1025\n";
        assert_eq!(
            parse(text),
            Some(FileUsage {
                client_id: 42,
                hbm_bytes: vec![3 << 20, 5 << 10, 1025],
            })
        );
    }

    #[test]
    fn other_files_and_bad_sizes_are_not_ours() {
        assert_eq!(parse("pos:\t0\nflags:\t02\n"), None);
        assert_eq!(parse("drm-driver:\ti915\ndrm-client-id:\t1\n"), None);
        let bad = "drm-driver:\tneuron_hbm\ndrm-client-id:\t1\ndrm-total-hbm0:\t3 GiB\n";
        assert_eq!(parse(bad), None);
    }
}
