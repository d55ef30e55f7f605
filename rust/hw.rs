// SPDX-License-Identifier: GPL-2.0-only

//! The hardware: BAR0's registers, the device-access interface both backends
//! serve and the firmware reset handshake.

pub(crate) mod bar4;
pub(crate) mod fw;
pub(crate) mod io;
pub(crate) mod regs;
pub(crate) mod udma;
