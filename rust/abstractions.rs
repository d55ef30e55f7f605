// SPDX-License-Identifier: GPL-2.0-only

//! Kernel abstractions the kernel crate lacks, over their C helpers: the only
//! files of the module with `unsafe` code or `extern "C"` declarations.

pub(crate) mod blank_page;
pub(crate) mod capability;
pub(crate) mod current;
pub(crate) mod dma_buf;
pub(crate) mod dma_mask;
pub(crate) mod dmem;
pub(crate) mod genpool;
pub(crate) mod helpers;
pub(crate) mod io_view;
pub(crate) mod miscdev;
pub(crate) mod page_box;
pub(crate) mod pci_override;
pub(crate) mod pci_presence;
pub(crate) mod plain;
#[cfg(nhbm_bench)]
pub(crate) mod ref_pool;
pub(crate) mod resched;
pub(crate) mod reset_queue;
pub(crate) mod trace;
pub(crate) mod uapi_types;
pub(crate) mod user_dma;
pub(crate) mod user_source;
pub(crate) mod vma;
pub(crate) mod wc_bar;
