//! PLAN_LOAD refusals: every validation rule with its errno, each checked to
//! leave MEM_STATS exactly as it was. Where the library's validator can judge
//! the blob too, it must give the same errno as the kernel.

use nhbm::uapi::*;
use nhbm::{validate, Limits, Plan, RawPlan, Record};

use crate::fixtures::*;
use crate::ktap::*;
use crate::mem::Guarded;

/// Builds `every_local_kind`, lets `f` break the raw form, and expects the
/// kernel (and the library's validator) to refuse it with `errno`.
fn reject_raw(errno: i32, f: fn(&mut RawPlan)) -> TestResult {
    let d = dev()?;
    let i = info(&d)?;
    let mut raw = every_local_kind(8 * KIB).to_raw().ctx("build")?;
    f(&mut raw);
    let blob = raw.to_bytes();
    load_rejected(&d, &blob, CHANNEL_ANY, errno)?;
    match validate(&blob, &Limits::from_device_info(&i)) {
        Err(e) if e.errno == errno => Ok(()),
        Err(e) => fail(format!("the library's validator disagrees: {e}")),
        Ok(_) => fail("the library's validator accepts this blob"),
    }
}

/// Appends `r` to `every_local_kind` and expects PLAN_LOAD to refuse it.
fn reject_record(errno: i32, r: fn() -> Record) -> TestResult {
    let d = dev()?;
    let blob = every_local_kind(8 * KIB)
        .with(r())
        .to_raw()
        .ctx("build")?
        .to_bytes();
    load_rejected(&d, &blob, CHANNEL_ANY, errno)
}

fn rec(raw: &mut RawPlan, var_id: u32) -> &mut MemRef {
    raw.records
        .iter_mut()
        .find(|r| r.var_id == var_id)
        .expect("var in every_local_kind")
}

fn blob_end(raw: &RawPlan) -> u64 {
    (RawPlan::data_start(raw.records.len()) + raw.data.len()) as u64
}

pub fn rejects_blob_shorter_than_header() -> TestResult {
    let d = dev()?;
    let blob = every_local_kind(8 * KIB).to_blob().ctx("build")?;
    load_rejected(&d, &blob[..23], CHANNEL_ANY, libc::EINVAL)?;
    load_rejected(&d, &[], CHANNEL_ANY, libc::EINVAL)
}

pub fn rejects_nmem_zero() -> TestResult {
    reject_raw(libc::EINVAL, |r| r.header.nmem = 0)
}

pub fn rejects_nmem_over_limit_with_e2big() -> TestResult {
    reject_raw(libc::E2BIG, |r| r.header.nmem = MAX_PLAN_RECORDS + 1)
}

pub fn rejects_records_past_blob_end() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        r.header.nmem = r.records.len() as u32 + 1 + (r.data.len() / MEM_REF_SIZE) as u32
    })
}

pub fn rejects_truncated_blob() -> TestResult {
    let d = dev()?;
    let blob = every_local_kind(8 * KIB).to_blob().ctx("build")?;
    load_rejected(&d, &blob[..24 + 152 * 3 + 100], CHANNEL_ANY, libc::EINVAL)
}

pub fn rejects_header_rsvd_nonzero() -> TestResult {
    reject_raw(libc::EINVAL, |r| r.header.rsvd = 1)
}

pub fn rejects_record_flags_nonzero() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 3).flags = 1)
}

pub fn rejects_load_flags_or_rsvd_nonzero() -> TestResult {
    let d = dev()?;
    let blob = every_local_kind(8 * KIB).to_blob().ctx("build")?;
    for (flags, rsvd) in [(1, 0), (0x8000_0000, 0), (0, 1)] {
        let mut arg = PlanLoad {
            blob: blob.as_ptr() as u64,
            blob_len: blob.len() as u64,
            channel: CHANNEL_ANY,
            flags,
            rsvd,
            ..Default::default()
        };
        // SAFETY: blob is readable for blob_len bytes; addrs is 0.
        unsafe { load_raw_rejected(&d, &mut arg, libc::EINVAL) }?;
    }
    Ok(())
}

pub fn rejects_union_rsvd_nonzero() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 8);
        m.u = MemRefUnion::from(MrPtr {
            rsvd: 1,
            ..m.u.ptr()
        });
    })
}

pub fn rejects_union_bits_on_a_buffer() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        rec(r, 12).u = MemRefUnion { raw: [0, 1] };
    })
}

pub fn rejects_mr_invalid() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 12).mr_type = MR_INVALID)
}

pub fn rejects_mr_type_past_remote() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 12).mr_type = MR_REMOTE + 1)
}

pub fn rejects_dtype_of_16_characters() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 1).dtype = *b"float32_float32x")
}

pub fn rejects_ndim_9() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 1).ndim = 9)
}

pub fn rejects_shape_past_ndim() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 1).shape[5] = 2)
}

pub fn rejects_non_power_of_two_alignment() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 3).alignment = 3 * 1024)
}

pub fn rejects_alignment_over_1_gib_with_e2big() -> TestResult {
    reject_raw(libc::E2BIG, |r| rec(r, 3).alignment = MAX_ALIGNMENT << 1)
}

pub fn rejects_duplicate_var_id() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 12).var_id = 5)
}

pub fn rejects_dangling_ptr_with_enoent() -> TestResult {
    reject_raw(libc::ENOENT, |r| {
        rec(r, 8).u = MemRefUnion::from(MrPtr {
            target_var_id: 4242,
            rsvd: 0,
            rsvd2: 0,
        });
    })
}

pub fn rejects_self_ptr() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        rec(r, 8).u = MemRefUnion::from(MrPtr {
            target_var_id: 8,
            rsvd: 0,
            rsvd2: 0,
        });
    })
}

pub fn rejects_dangling_list_entry_with_enoent() -> TestResult {
    reject_raw(libc::ENOENT, |r| {
        // var 9 lists 1, 2, 3, 12: turn the 12 into a missing id.
        let l = rec(r, 9).u.list();
        let at = l.ids_off as usize + 12 - RawPlan::data_start(r.records.len());
        r.data[at..at + 4].copy_from_slice(&4242u32.to_le_bytes());
    })
}

pub fn rejects_list_listing_itself() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let l = rec(r, 9).u.list();
        let at = l.ids_off as usize - RawPlan::data_start(r.records.len());
        r.data[at..at + 4].copy_from_slice(&9u32.to_le_bytes());
    })
}

pub fn rejects_ptr_table_listing_a_non_list() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        // var 11 lists 9 and 10: make the 10 a 5 (a tmp buffer).
        let l = rec(r, 11).u.list();
        let at = l.ids_off as usize + 4 - RawPlan::data_start(r.records.len());
        r.data[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
    })
}

pub fn rejects_list_smaller_than_its_entries() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 9).size = 31)
}

pub fn rejects_list_ids_outside_blob() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 9);
        m.u = MemRefUnion::from(MrList {
            ids_off: u64::MAX - 7,
            ..m.u.list()
        });
    })
}

pub fn rejects_list_count_over_limit_with_e2big() -> TestResult {
    reject_raw(libc::E2BIG, |r| {
        let m = rec(r, 9);
        m.u = MemRefUnion::from(MrList {
            count: MAX_LIST_COUNT + 1,
            ..m.u.list()
        });
        m.size = 8 * u64::from(MAX_LIST_COUNT + 1);
    })
}

pub fn rejects_name_without_nul() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        r.data.extend_from_slice(b"unterminated");
        let end = blob_end(r);
        rec(r, 3).name_off = end - 12;
    })
}

pub fn rejects_name_outside_blob() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let end = blob_end(r);
        rec(r, 3).name_off = end;
    })
}

pub fn rejects_payload_outside_blob() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let end = blob_end(r);
        rec(r, 3).data_off = end - 100;
    })
}

pub fn rejects_payload_offset_overflow() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        rec(r, 3).data_off = u64::MAX - 16;
    })
}

pub fn rejects_payload_larger_than_size() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 4);
        m.size = m.data_len - 1;
    })
}

pub fn rejects_zero_size_buffer() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 12).size = 0)
}

pub fn rejects_zero_size_vtmp() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 6).size = 0)
}

pub fn rejects_data_off_without_payload() -> TestResult {
    reject_raw(libc::EINVAL, |r| rec(r, 12).data_off = 24)
}

pub fn rejects_empty_list() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 10);
        m.u = MemRefUnion::from(MrList {
            count: 0,
            ..m.u.list()
        });
    })
}

pub fn rejects_name_longer_than_name_max() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let long = vec![b'n'; nhbm::validate::NAME_MAX];
        r.data.extend_from_slice(&long);
        r.data.push(0);
        let end = blob_end(r);
        rec(r, 3).name_off = end - 1 - long.len() as u64;
    })
}

pub fn rejects_vtmp_outside_scratchpad() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 6);
        m.u = MemRefUnion::from(MrVtmp {
            offset: 64 * 1024 - 1023,
            ..m.u.vtmp()
        });
    })
}

pub fn rejects_vtmp_offset_overflow() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 6);
        m.u = MemRefUnion::from(MrVtmp {
            offset: u64::MAX - 10,
            ..m.u.vtmp()
        });
    })
}

pub fn rejects_unknown_backing() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 6);
        m.u = MemRefUnion::from(MrVtmp {
            backing: 4,
            ..m.u.vtmp()
        });
    })
}

pub fn rejects_sharded_window_past_its_shard() -> TestResult {
    // Core 1's shard of the 16 KiB shared scratchpad is at most 8 KiB.
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 7);
        m.u = MemRefUnion::from(MrVtmp {
            offset: 8 * KIB - 256,
            backing: BACKING_SHARDED,
            nc_id: 1,
        });
    })
}

pub fn rejects_sharded_window_of_a_missing_core() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 7);
        m.u = MemRefUnion::from(MrVtmp {
            offset: 0,
            backing: BACKING_SHARDED,
            nc_id: MAX_CORES as u32,
        });
    })
}

pub fn rejects_main_buffer_at_an_offset() -> TestResult {
    reject_raw(libc::EINVAL, |r| {
        let m = rec(r, 7);
        m.u = MemRefUnion::from(MrVtmp {
            offset: 512,
            backing: BACKING_MAIN,
            nc_id: 0,
        });
    })
}

pub fn rejects_sb_outside_state_buffer() -> TestResult {
    reject_record(libc::EINVAL, || Record::sb(99, 4097, 0, 32 * MIB - 4096))
}

pub fn rejects_sb_of_missing_core() -> TestResult {
    reject_record(libc::EINVAL, || Record::sb(99, 64, 2, 0))
}

pub fn rejects_buffer_larger_than_a_channel_with_enomem() -> TestResult {
    reject_record(libc::ENOMEM, || Record::buffer(99, 16 * GIB + 4096))
}

pub fn rejects_unknown_channel() -> TestResult {
    let d = dev()?;
    let n = info(&d)?.nr_channels;
    let blob = every_local_kind(8 * KIB).to_blob().ctx("build")?;
    load_rejected(&d, &blob, n, libc::EINVAL)?;
    load_rejected(&d, &blob, CHANNEL_ANY - 1, libc::EINVAL)
}

pub fn enomem_halfway_leaves_no_trace() -> TestResult {
    if expected_simulated() == 0 {
        return skip(HOST_BACKED_BAR4);
    }
    let d = dev()?;
    let plan = Plan::new(0, 0)
        .with(Record::buffer(1, 4096).data(pattern(4096, 1)))
        .with(Record::buffer(2, 12 * GIB))
        .with(Record::buffer(3, 12 * GIB));
    load_rejected(&d, &plan.to_blob().ctx("build")?, 0, libc::ENOMEM)?;
    // The pool is whole again: one 12 GiB buffer still fits there.
    let p = d
        .plan_load(&one_buffer(1, 12 * GIB).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD 12 GiB after the failure")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

pub fn rejects_bad_blob_pointer_with_efault() -> TestResult {
    let d = dev()?;
    let mut arg = PlanLoad {
        blob: 0x1000,
        blob_len: 4096,
        channel: CHANNEL_ANY,
        ..Default::default()
    };
    // SAFETY: deliberately invalid user pointer; the kernel must answer EFAULT.
    unsafe { load_raw_rejected(&d, &mut arg, libc::EFAULT) }
}

pub fn rejects_blob_faulting_halfway_with_efault() -> TestResult {
    let d = dev()?;
    // The payload comes last in the blob; its last page is unreadable,
    // so the header, records and names read fine and the upload faults.
    let plan =
        every_local_kind(8 * KIB).with(Record::buffer(99, 64 * KIB).data(pattern(64 * KIB, 99)));
    let blob = plan.to_blob().ctx("build")?;
    let mut guarded = Guarded::new(blob.len()).ctx("mmap")?;
    let at = guarded.place_before_guard(&blob[..blob.len() - 4096], 0);
    let mut arg = PlanLoad {
        blob: at,
        blob_len: blob.len() as u64,
        channel: CHANNEL_ANY,
        ..Default::default()
    };
    // SAFETY: the blob's last 4 KiB are PROT_NONE on purpose; everything
    // else is readable, addrs is 0.
    unsafe { load_raw_rejected(&d, &mut arg, libc::EFAULT) }
}

pub fn rejects_bad_addrs_pointer_with_efault() -> TestResult {
    let d = dev()?;
    let blob = every_local_kind(8 * KIB).to_blob().ctx("build")?;
    let mut arg = PlanLoad {
        blob: blob.as_ptr() as u64,
        blob_len: blob.len() as u64,
        addrs: 0x1000,
        channel: CHANNEL_ANY,
        ..Default::default()
    };
    // SAFETY: blob is readable; addrs is deliberately invalid.
    unsafe { load_raw_rejected(&d, &mut arg, libc::EFAULT) }
}
