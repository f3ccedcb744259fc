//! A running process's memory as the kernel accounts it, for the memory benchmark.
//!
//! Linux keeps two figures per process in `/proc/<pid>/status`: `VmRSS`, the resident set now
//! (what a container's memory limit is held against), and `VmHWM`, the highest resident set
//! since the process started (its peak, which is what gets a process OOM-killed). Both count
//! pages, so they do not depend on CPU load from elsewhere on the machine the way times do.

use crate::Error;

/// One reading of a process's resident memory, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `VmHWM`: the peak resident set since the process started.
    pub peak_kib: u64,
    /// `VmRSS`: the resident set now.
    pub resident_kib: u64,
}

impl Memory {
    /// The reading of process `pid`.
    pub fn of_pid(pid: u32) -> Result<Memory, Error> {
        let path = format!("/proc/{pid}/status");
        let status =
            std::fs::read_to_string(&path).map_err(Error::io(format!("reading {path}")))?;
        Memory::parse(&status).map_err(|message| Error::Invalid {
            what: format!("reading {path}"),
            message,
        })
    }

    /// The reading in the text of a `/proc/<pid>/status` file.
    pub fn parse(status: &str) -> Result<Memory, String> {
        Ok(Memory {
            peak_kib: field_kib(status, "VmHWM")?,
            resident_kib: field_kib(status, "VmRSS")?,
        })
    }
}

/// `<name>:   1234 kB` as KiB.
fn field_kib(status: &str, name: &str) -> Result<u64, String> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .ok_or_else(|| format!("no {name} line (is this Linux, and is the process alive?)"))?;
    let value = line.trim();
    value
        .strip_suffix("kB")
        .map(str::trim)
        .and_then(|number| number.parse().ok())
        .ok_or_else(|| format!("{name} is {value:?}, not a number of kB"))
}

/// KiB as MiB with one decimal, for tables.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_peak_and_resident_from_a_status_file() {
        let status =
            "Name:\tarbor\nVmPeak:\t  900000 kB\nVmHWM:\t   52000 kB\nVmRSS:\t   48000 kB\n";
        assert_eq!(
            Memory::parse(status),
            Ok(Memory {
                peak_kib: 52_000,
                resident_kib: 48_000
            })
        );
    }

    #[test]
    fn a_missing_or_malformed_field_is_named() {
        let missing = Memory::parse("Name:\tarbor\nVmRSS:\t 1 kB\n").unwrap_err();
        assert!(missing.contains("VmHWM"), "{missing}");
        let malformed = Memory::parse("VmHWM:\t lots kB\nVmRSS:\t 1 kB\n").unwrap_err();
        assert!(malformed.contains("VmHWM"), "{malformed}");
    }

    #[test]
    fn this_process_has_a_resident_set_no_larger_than_its_peak() {
        let memory = Memory::of_pid(std::process::id()).unwrap();
        assert!(memory.resident_kib > 0);
        assert!(memory.resident_kib <= memory.peak_kib, "{memory:?}");
    }

    #[test]
    fn a_process_that_does_not_exist_names_its_status_file() {
        let message = Memory::of_pid(u32::MAX).unwrap_err().to_string();
        assert!(
            message.contains(&format!("/proc/{}/status", u32::MAX)),
            "{message}"
        );
    }
}
