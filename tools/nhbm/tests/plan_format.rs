//! The plan blob: builder layout, parser, JSON round trips, and every
//! validation rule with the errno the kernel answers.

use nhbm::uapi::*;
use nhbm::{validate, Backing, Kind, Limits, Plan, PlanError, RawPlan, Record};

/// One record of every kind, with names, payloads and list ids.
fn every_kind() -> Plan {
    Plan::new(4096, 1024)
        .with(
            Record::input(1, 256)
                .name("input")
                .dtype("float32", &[8, 8]),
        )
        .with(
            Record::output(2, 128)
                .name("output")
                .dtype("bfloat16", &[64]),
        )
        .with(
            Record::buffer(3, 64)
                .name("weights")
                .alignment(64)
                .data((0..64).collect()),
        )
        .with(Record::buffer_staged(4, 32).data(vec![0xAB; 20]))
        .with(Record::tmp_buf(5, 512).name("tmp"))
        .with(Record::virtual_tmp_buf(6, 128, Backing::Local, 256).name("act0"))
        .with(Record::virtual_tmp_buf(7, 64, Backing::Shared, 0))
        .with(Record::ptr(8, 3, 64).name("weights_alias"))
        .with(Record::list(9, vec![1, 2, 3, 12]))
        .with(Record::list(10, vec![5]))
        .with(Record::ptr_table(11, vec![9, 10]))
        .with(Record::buffer(12, 16)) // listed by 9 before it appears: forward reference
        .with(Record::sb(13, 4096, 1, 0x1000).name("sbuf"))
        .with(Record::remote(14, 64, 1, 3))
}

fn errno_of(r: Result<impl std::fmt::Debug, PlanError>) -> i32 {
    r.expect_err("the blob should have been refused").errno
}

/// Builds `every_kind`, lets `f` break the raw form, and validates the result.
fn broken(f: impl FnOnce(&mut RawPlan)) -> Result<RawPlan, PlanError> {
    let mut raw = every_kind().to_raw().unwrap();
    f(&mut raw);
    validate(&raw.to_bytes(), &Limits::default())
}

fn rec(raw: &mut RawPlan, var_id: u32) -> &mut MemRef {
    raw.records.iter_mut().find(|r| r.var_id == var_id).unwrap()
}

#[test]
fn builder_lays_out_header_records_and_data() {
    let plan = every_kind();
    let blob = plan.to_blob().unwrap();
    let raw = RawPlan::from_bytes(&blob).unwrap();
    assert_eq!(raw.header.nmem, 14);
    assert_eq!(raw.header.local_scratchpad_size, 4096);
    assert_eq!(raw.header.shared_scratchpad_size, 1024);
    assert_eq!(&blob[16..20], &14u32.to_le_bytes());
    let data_start = (24 + 14 * 152) as u64;
    for r in &raw.records {
        if r.name_off != 0 {
            assert!(r.name_off >= data_start);
        }
        if r.data_len != 0 {
            assert!(r.data_off >= data_start);
            assert_eq!(r.data_off % 8, 0);
        }
    }
    let w = raw.records.iter().find(|r| r.var_id == 3).unwrap();
    assert_eq!(w.mr_type, MR_BUFFER);
    assert_eq!(w.alignment, 64);
    assert_eq!(w.data_len, 64);
    assert_eq!(
        &blob[w.data_off as usize..][..64],
        &(0..64).collect::<Vec<u8>>()[..]
    );
    let name = &blob[w.name_off as usize..][..8];
    assert_eq!(name, b"weights\0");
    let l = raw.records.iter().find(|r| r.var_id == 9).unwrap().u.list();
    assert_eq!(l.count, 4);
    assert_eq!(l.ids_off % 4, 0);
    let ids: Vec<u32> = blob[l.ids_off as usize..][..16]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ids, vec![1, 2, 3, 12]);
    let v = raw.records.iter().find(|r| r.var_id == 6).unwrap();
    assert_eq!(v.u.vtmp().offset, 256);
    assert_eq!(v.u.vtmp().backing, BACKING_LOCAL);
    let sb = raw.records.iter().find(|r| r.var_id == 13).unwrap().u.sb();
    assert_eq!((sb.nc_id, sb.offset), (1, 0x1000));
    let input = raw.records.iter().find(|r| r.var_id == 1).unwrap();
    assert_eq!(&input.dtype[..8], b"float32\0");
    assert_eq!(
        (input.ndim, input.shape[0], input.shape[1], input.shape[2]),
        (2, 8, 8, 0)
    );
}

#[test]
fn blob_round_trips_through_the_parser() {
    let plan = every_kind();
    let blob = plan.to_blob().unwrap();
    let back = Plan::from_blob(&blob).unwrap();
    assert_eq!(back, plan);
    assert_eq!(back.to_blob().unwrap(), blob);
}

#[test]
fn json_round_trips_with_the_blob() {
    let plan = every_kind();
    let json = plan.to_json();
    let from_json = Plan::from_json(&json).unwrap();
    assert_eq!(from_json, plan);
    let blob = from_json.to_blob().unwrap();
    assert_eq!(Plan::from_blob(&blob).unwrap().to_json(), json);
}

#[test]
fn json_form_is_readable() {
    let json = Plan::new(0, 0)
        .with(
            Record::buffer(3, 4)
                .name("w")
                .data(vec![0xde, 0xad, 0xbe, 0xef]),
        )
        .with(Record::virtual_tmp_buf(4, 8, Backing::Shared, 16))
        .to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["records"][0]["type"], "buffer");
    assert_eq!(v["records"][0]["data_hex"], "deadbeef");
    assert_eq!(v["records"][1]["type"], "virtual_tmp_buf");
    assert_eq!(v["records"][1]["backing"], "shared");
    assert_eq!(v["records"][1]["offset"], 16);
    let hand = r#"{"records": [{"var_id": 1, "type": "list", "size": 16, "ids": [2, 3]},
        {"var_id": 2, "type": "input", "size": 8}, {"var_id": 3, "type": "ptr", "target": 2}]}"#;
    let p = Plan::from_json(hand).unwrap();
    assert_eq!(p.records[0].kind, Kind::List { ids: vec![2, 3] });
    p.to_blob().unwrap();
    assert!(Plan::from_json(r#"{"records": [{"var_id": 1, "type": "bogus"}]}"#).is_err());
    assert!(Plan::from_json(
        r#"{"records": [{"var_id": 1, "type": "buffer", "data_hex": "abc"}]}"#
    )
    .is_err());
}

#[test]
fn a_single_record_plan_is_valid() {
    let blob = Plan::new(0, 0)
        .with(Record::buffer(0, 1))
        .to_blob()
        .unwrap();
    assert_eq!(blob.len(), 24 + 152);
}

// ---- header ----

#[test]
fn rejects_a_blob_shorter_than_the_header() {
    let blob = every_kind().to_blob().unwrap();
    assert_eq!(
        errno_of(validate(&blob[..23], &Limits::default())),
        libc::EINVAL
    );
    assert_eq!(errno_of(validate(&[], &Limits::default())), libc::EINVAL);
}

#[test]
fn rejects_header_rsvd() {
    assert_eq!(errno_of(broken(|r| r.header.rsvd = 1)), libc::EINVAL);
}

#[test]
fn rejects_nmem_zero() {
    assert_eq!(errno_of(broken(|r| r.header.nmem = 0)), libc::EINVAL);
}

#[test]
fn rejects_nmem_over_the_maximum_with_e2big() {
    assert_eq!(
        errno_of(broken(|r| r.header.nmem = MAX_PLAN_RECORDS + 1)),
        libc::E2BIG
    );
    assert_eq!(errno_of(broken(|r| r.header.nmem = u32::MAX)), libc::E2BIG);
}

#[test]
fn rejects_records_past_the_end() {
    // nmem at the maximum is not E2BIG, but the records are not there.
    assert_eq!(
        errno_of(broken(|r| r.header.nmem = MAX_PLAN_RECORDS)),
        libc::EINVAL
    );
    let blob = every_kind().to_blob().unwrap();
    assert_eq!(
        errno_of(validate(&blob[..24 + 14 * 152 - 1], &Limits::default())),
        libc::EINVAL
    );
}

// ---- per record ----

#[test]
fn rejects_bad_mr_types() {
    assert_eq!(
        errno_of(broken(|r| rec(r, 3).mr_type = MR_INVALID)),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(broken(|r| rec(r, 3).mr_type = MR_REMOTE + 1)),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(broken(|r| rec(r, 3).mr_type = u32::MAX)),
        libc::EINVAL
    );
}

#[test]
fn rejects_nonzero_flags() {
    assert_eq!(errno_of(broken(|r| rec(r, 3).flags = 1)), libc::EINVAL);
}

#[test]
fn rejects_names_outside_the_blob_or_unterminated() {
    assert_eq!(
        errno_of(broken(|r| rec(r, 3).name_off = u64::MAX)),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(broken(|r| {
            let end = (RawPlan::data_start(r.records.len()) + r.data.len()) as u64;
            rec(r, 3).name_off = end;
        })),
        libc::EINVAL
    );
    // A name that runs to the last byte of the blob without a NUL.
    let err = broken(|r| {
        r.data.extend_from_slice(b"tail");
        let end = (RawPlan::data_start(r.records.len()) + r.data.len()) as u64;
        rec(r, 3).name_off = end - 4;
    });
    assert_eq!(errno_of(err), libc::EINVAL);
    // ...and the same name with its NUL is fine.
    broken(|r| {
        r.data.extend_from_slice(b"tail\0");
        let end = (RawPlan::data_start(r.records.len()) + r.data.len()) as u64;
        rec(r, 3).name_off = end - 5;
    })
    .unwrap();
}

#[test]
fn dtype_of_15_characters_is_the_limit() {
    every_kind()
        .with(Record::buffer(99, 8).dtype("a".repeat(15), &[1]))
        .to_blob()
        .unwrap();
    let e = every_kind()
        .with(Record::buffer(99, 8).dtype("a".repeat(16), &[1]))
        .to_raw();
    assert_eq!(errno_of(e), libc::EINVAL);
    assert_eq!(
        errno_of(broken(|r| rec(r, 1).dtype = [b'x'; 16])),
        libc::EINVAL
    );
}

#[test]
fn ndim_of_8_is_the_limit() {
    every_kind()
        .with(Record::buffer(99, 8).dtype("u8", &[1; 8]))
        .to_blob()
        .unwrap();
    let e = every_kind()
        .with(Record::buffer(99, 8).dtype("u8", &[1; 9]))
        .to_raw();
    assert_eq!(errno_of(e), libc::EINVAL);
    assert_eq!(errno_of(broken(|r| rec(r, 1).ndim = 9)), libc::EINVAL);
    assert_eq!(
        errno_of(broken(|r| rec(r, 1).ndim = u32::MAX)),
        libc::EINVAL
    );
}

#[test]
fn rejects_shape_entries_past_ndim() {
    assert_eq!(errno_of(broken(|r| rec(r, 1).shape[2] = 4)), libc::EINVAL);
    assert_eq!(errno_of(broken(|r| rec(r, 1).shape[7] = 1)), libc::EINVAL);
}

#[test]
fn alignment_must_be_a_power_of_two_up_to_1_gib() {
    for ok in [0, 1, 2, 4096, MAX_ALIGNMENT] {
        broken(|r| rec(r, 3).alignment = ok).unwrap();
    }
    for bad in [3, 48, 4097, u64::MAX] {
        assert_eq!(
            errno_of(broken(|r| rec(r, 3).alignment = bad)),
            libc::EINVAL,
            "{bad}"
        );
    }
    // Over the limit rather than malformed.
    for big in [MAX_ALIGNMENT * 2, 1 << 63] {
        assert_eq!(
            errno_of(broken(|r| rec(r, 3).alignment = big)),
            libc::E2BIG,
            "{big}"
        );
    }
}

#[test]
fn payload_must_fit_the_variable_and_the_blob() {
    assert_eq!(errno_of(broken(|r| rec(r, 3).data_len = 65)), libc::EINVAL);
    assert_eq!(
        errno_of(broken(|r| rec(r, 3).data_off = u64::MAX - 8)),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(broken(|r| {
            let end = (RawPlan::data_start(r.records.len()) + r.data.len()) as u64;
            rec(r, 3).data_off = end - 63;
        })),
        libc::EINVAL
    );
    // The last byte of the blob is still inside.
    broken(|r| {
        let end = (RawPlan::data_start(r.records.len()) + r.data.len()) as u64;
        rec(r, 3).data_off = end - 64;
    })
    .unwrap();
}

#[test]
fn payload_only_on_kinds_that_allocate() {
    for var in [6, 8, 9, 11, 13, 14] {
        let e = broken(|r| {
            let m = rec(r, var);
            m.data_off = 24;
            m.data_len = 1;
            m.size = m.size.max(8);
        });
        assert_eq!(errno_of(e), libc::EINVAL, "var {var}");
    }
}

#[test]
fn rejects_zero_size_where_memory_is_allocated() {
    for var in [1, 2, 5, 12] {
        assert_eq!(
            errno_of(broken(|r| rec(r, var).size = 0)),
            libc::EINVAL,
            "var {var}"
        );
    }
    // Record 3 and 4 carry payloads, so data_len > size fires first; still EINVAL.
    assert_eq!(errno_of(broken(|r| rec(r, 4).size = 0)), libc::EINVAL);
}

#[test]
fn rejects_union_bits_on_plain_kinds() {
    assert_eq!(
        errno_of(broken(|r| rec(r, 3).u = MemRefUnion { raw: [0, 1 << 40] })),
        libc::EINVAL
    );
    assert_eq!(
        errno_of(broken(|r| rec(r, 1).u = MemRefUnion { raw: [1, 0] })),
        libc::EINVAL
    );
}

#[test]
fn rejects_reserved_union_fields() {
    type Break = fn(&mut MemRef);
    let cases: [(u32, Break); 6] = [
        (6, |m| {
            // A core named on a LOCAL window.
            m.u = MemRefUnion::from(MrVtmp {
                nc_id: 1,
                ..m.u.vtmp()
            })
        }),
        (8, |m| {
            m.u = MemRefUnion::from(MrPtr {
                rsvd: 1,
                ..m.u.ptr()
            })
        }),
        (8, |m| {
            m.u = MemRefUnion::from(MrPtr {
                rsvd2: 1,
                ..m.u.ptr()
            })
        }),
        (9, |m| {
            m.u = MemRefUnion::from(MrList {
                rsvd: 1,
                ..m.u.list()
            })
        }),
        (13, |m| {
            m.u = MemRefUnion::from(MrSb {
                rsvd: 1,
                ..m.u.sb()
            })
        }),
        (14, |m| {
            m.u = MemRefUnion::from(MrRemote {
                rsvd: 1,
                ..m.u.remote()
            })
        }),
    ];
    for (var, f) in cases {
        assert_eq!(
            errno_of(broken(|r| f(rec(r, var)))),
            libc::EINVAL,
            "var {var}"
        );
    }
}

#[test]
fn rejects_duplicate_var_ids() {
    let e = every_kind().with(Record::buffer(3, 8)).to_blob();
    let err = e.unwrap_err();
    assert_eq!(err.errno, libc::EINVAL);
    assert_eq!(err.record, Some(14));
    assert!(err.to_string().contains("duplicate var_id"), "{err}");
}

// ---- virtual tmp buf ----

#[test]
fn sharded_and_main_backings() {
    let vtmp = |b, off| every_kind().with(Record::virtual_tmp_buf(99, 8, b, off));
    // MAIN: a buffer of its own, at offset 0 only.
    let blob = vtmp(Backing::Main, 0).to_blob().unwrap();
    let back = Plan::from_blob(&blob).unwrap();
    assert_eq!(back.records.last(), vtmp(Backing::Main, 0).records.last());
    assert_eq!(errno_of(vtmp(Backing::Main, 8).to_blob()), libc::EINVAL);
    // SHARDED on a V2: two shards of the 1024-byte shared scratchpad.
    let v2 = Limits::for_arch_name("v2").unwrap();
    let blob = vtmp(Backing::Sharded(1), 504).to_blob_for(&v2).unwrap();
    let back = Plan::from_blob(&blob).unwrap();
    assert_eq!(
        back.records.last(),
        vtmp(Backing::Sharded(1), 504).records.last()
    );
    let past = vtmp(Backing::Sharded(0), 505).to_blob_for(&v2);
    assert_eq!(errno_of(past), libc::EINVAL);
    let no_core = vtmp(Backing::Sharded(2), 0).to_blob_for(&v2);
    assert_eq!(errno_of(no_core), libc::EINVAL);
    // Unknown device: anywhere in the shared scratchpad.
    vtmp(Backing::Sharded(7), 1016).to_blob().unwrap();
    let e = broken(|r| {
        let m = rec(r, 6);
        m.u = MemRefUnion::from(MrVtmp {
            backing: 4,
            ..m.u.vtmp()
        });
    });
    assert_eq!(errno_of(e), libc::EINVAL);
}

#[test]
fn virtual_tmp_buf_must_fit_its_scratchpad() {
    // local scratchpad is 4096: [3968, 4096) fits, one byte more does not.
    every_kind()
        .with(Record::virtual_tmp_buf(99, 128, Backing::Local, 3968))
        .to_blob()
        .unwrap();
    let e = every_kind()
        .with(Record::virtual_tmp_buf(99, 129, Backing::Local, 3968))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    // shared is 1024.
    let e = every_kind()
        .with(Record::virtual_tmp_buf(99, 1, Backing::Shared, 1024))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    let e = every_kind()
        .with(Record::virtual_tmp_buf(99, 2, Backing::Local, u64::MAX))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    // no scratchpad at all
    let e = Plan::new(0, 0)
        .with(Record::virtual_tmp_buf(1, 1, Backing::Local, 0))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
}

// ---- lists ----

#[test]
fn list_count_over_the_maximum_is_e2big() {
    let e = broken(|r| {
        let m = rec(r, 9);
        m.u = MemRefUnion::from(MrList {
            count: MAX_LIST_COUNT + 1,
            ..m.u.list()
        });
    });
    assert_eq!(errno_of(e), libc::E2BIG);
}

#[test]
fn list_ids_must_be_inside_the_blob() {
    let e = broken(|r| {
        let m = rec(r, 9);
        m.u = MemRefUnion::from(MrList {
            ids_off: u64::MAX - 3,
            ..m.u.list()
        });
    });
    assert_eq!(errno_of(e), libc::EINVAL);
    let e = broken(|r| {
        let m = rec(r, 9);
        m.u = MemRefUnion::from(MrList {
            count: 100_000,
            ..m.u.list()
        });
        m.size = 800_000;
    });
    assert_eq!(errno_of(e), libc::EINVAL);
}

#[test]
fn list_size_must_hold_its_entries() {
    let e = every_kind().with(Record::list(99, vec![1, 2]).alignment(8));
    let mut e = e;
    e.records.last_mut().unwrap().size = 15;
    assert_eq!(errno_of(e.to_blob()), libc::EINVAL);
    e.records.last_mut().unwrap().size = 16;
    e.to_blob().unwrap();
    let empty = every_kind().with(Record::list(99, vec![]));
    assert_eq!(errno_of(empty.to_blob()), libc::EINVAL);
}

#[test]
fn rejects_dangling_and_self_references() {
    // A reference to a variable the plan does not have is ENOENT...
    let e = every_kind().with(Record::ptr(99, 1234, 8)).to_blob();
    assert_eq!(errno_of(e), libc::ENOENT);
    let e = every_kind().with(Record::list(99, vec![1, 1234])).to_blob();
    assert_eq!(errno_of(e), libc::ENOENT);
    let e = every_kind()
        .with(Record::ptr_table(99, vec![1234]))
        .to_blob();
    assert_eq!(errno_of(e), libc::ENOENT);
    // ...one to itself is malformed.
    let e = every_kind().with(Record::ptr(99, 99, 8)).to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    let e = every_kind().with(Record::list(99, vec![99])).to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    let e = every_kind().with(Record::ptr_table(99, vec![99])).to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
}

#[test]
fn ptr_chains_must_end_at_a_variable() {
    every_kind().with(Record::ptr(99, 8, 64)).to_blob().unwrap();
    let e = every_kind()
        .with(Record::ptr(98, 99, 8))
        .with(Record::ptr(99, 98, 8))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
}

#[test]
fn ptr_table_lists_only_lists() {
    let e = every_kind()
        .with(Record::ptr_table(99, vec![9, 3]))
        .to_blob();
    let err = e.unwrap_err();
    assert_eq!(err.errno, libc::EINVAL);
    assert!(err.to_string().contains("MR_PTR_TABLE"), "{err}");
    let e = every_kind().with(Record::ptr_table(99, vec![11])).to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
}

// ---- state buffer ----

#[test]
fn sb_rules_apply_when_the_device_is_known() {
    let v2 = Limits {
        nr_cores: Some(2),
        sbuf_size: Some(32 << 20),
    };
    every_kind().to_blob_for(&v2).unwrap();
    let p = every_kind().with(Record::sb(99, 4096, 1, (32 << 20) - 4096));
    p.to_blob_for(&v2).unwrap();
    let p = every_kind().with(Record::sb(99, 4097, 1, (32 << 20) - 4096));
    assert_eq!(errno_of(p.to_blob_for(&v2)), libc::EINVAL);
    p.to_blob().unwrap(); // without a device the rule is not known
    let p = every_kind().with(Record::sb(99, 8, 2, 0));
    assert_eq!(errno_of(p.to_blob_for(&v2)), libc::EINVAL);
    let p = every_kind().with(Record::sb(99, 8, 0, u64::MAX));
    assert_eq!(errno_of(p.to_blob_for(&v2)), libc::EINVAL);
}

#[test]
fn errors_name_the_record_and_rule() {
    let err = every_kind()
        .with(Record::buffer(77, 8).dtype("x".repeat(20), &[]))
        .to_raw()
        .unwrap_err();
    assert_eq!(err.record, Some(14));
    assert_eq!(err.var_id, Some(77));
    let s = err.to_string();
    assert!(s.starts_with("record 14 (var_id 77): dtype"), "{s}");
    assert!(s.ends_with("(EINVAL)"), "{s}");
}

#[test]
fn data_off_needs_a_payload() {
    assert_eq!(errno_of(broken(|r| rec(r, 12).data_off = 24)), libc::EINVAL);
    assert_eq!(errno_of(broken(|r| rec(r, 6).data_off = 24)), libc::EINVAL);
}

#[test]
fn names_end_within_name_max() {
    use nhbm::validate::NAME_MAX;
    every_kind()
        .with(Record::buffer(99, 8).name("n".repeat(NAME_MAX - 1)))
        .to_blob()
        .unwrap();
    let e = every_kind()
        .with(Record::buffer(99, 8).name("n".repeat(NAME_MAX)))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
}

#[test]
fn scratch_and_state_buffer_windows_are_not_empty() {
    let e = every_kind()
        .with(Record::virtual_tmp_buf(99, 0, Backing::Local, 0))
        .to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    let e = every_kind().with(Record::sb(99, 0, 0, 0)).to_blob();
    assert_eq!(errno_of(e), libc::EINVAL);
    // A pointer may leave its size 0 ("as its target").
    every_kind().with(Record::ptr(99, 3, 0)).to_blob().unwrap();
}

#[test]
fn all_lists_together_have_a_limit() {
    // Lists of NHBM_MAX_LIST_COUNT ids sharing one id array: each is within
    // its own limit; five together exceed 4 x the limit.
    let n = MAX_LIST_COUNT as usize;
    let blob_of = |lists: u32| {
        let nmem = 1 + lists as usize;
        let ids_off = RawPlan::data_start(nmem) as u64;
        let mut raw = RawPlan {
            header: PlanHeader {
                nmem: nmem as u32,
                ..Default::default()
            },
            records: vec![MemRef {
                mr_type: MR_BUFFER,
                var_id: 0,
                size: 8,
                ..Default::default()
            }],
            data: vec![0u8; 4 * n],
        };
        for k in 1..=lists {
            raw.records.push(MemRef {
                mr_type: MR_LIST,
                var_id: k,
                size: 8 * n as u64,
                u: MemRefUnion::from(MrList {
                    count: n as u32,
                    rsvd: 0,
                    ids_off,
                }),
                ..Default::default()
            });
        }
        raw.to_bytes()
    };
    let ok = validate(&blob_of(4), &Limits::default());
    assert!(ok.is_ok(), "{:?}", ok.err());
    assert_eq!(
        errno_of(validate(&blob_of(5), &Limits::default())),
        libc::E2BIG
    );
}

#[test]
fn the_documented_json_example_is_a_valid_plan() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```json\n").expect("a json block") + 8;
    let end = start + readme[start..].find("```").unwrap();
    let plan = Plan::from_json(&readme[start..end]).unwrap();
    assert_eq!(plan.records.len(), 7);
    let blob = plan.to_blob().unwrap();
    assert_eq!(Plan::from_blob(&blob).unwrap(), plan);
}
