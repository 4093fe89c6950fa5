//! A small tmpfs to run the server on, so a test can fill its disk for real. Mounting needs
//! root (the tests run as root here and in CI); without it the build script (`build.rs`) marks
//! the tests `#[ignore]` (`cfg(has_mount)`). Should the mount fail all the same, the test is
//! skipped with a loud notice, and with `BROADSHEET_REQUIRE_MOUNT=1` (CI) it fails.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; unmounted when dropped (also when the test panics).
pub struct SmallDisk {
    dir: PathBuf,
}

/// Where [`fill`] writes.
const FILLER: &str = "filler";

impl SmallDisk {
    /// Mounts a tmpfs of `size_mb` MiB on the existing empty directory `dir`, or returns
    /// `None` after a loud notice (a panic under CI).
    pub fn mount(dir: &Path, size_mb: u32) -> Option<SmallDisk> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir)
            .output();
        let problem = match out {
            Ok(out) if out.status.success() => {
                return Some(SmallDisk {
                    dir: dir.to_path_buf(),
                });
            }
            Ok(out) => format!(
                "mount exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Err(e) => format!("cannot run mount: {e}"),
        };
        let test = std::thread::current()
            .name()
            .unwrap_or("a disk-full test")
            .to_string();
        let message = format!(
            "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
             !! DISK-FULL TESTS SKIPPED ({test}): cannot mount a small tmpfs.\n\
             !! {problem}\n\
             !! Run the tests as root (or with CAP_SYS_ADMIN) to run them.\n\
             !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
        );
        if std::env::var("BROADSHEET_REQUIRE_MOUNT").is_ok_and(|v| v == "1") {
            panic!("{message}");
        }
        eprintln!("{message}");
        None
    }

    /// Writes a filler file until the filesystem refuses with ENOSPC; returns its size.
    pub fn fill(&self) -> u64 {
        let path = self.dir.join(FILLER);
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .expect("creating the filler file");
        let mut written = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        // Large pieces first, then smaller ones so the last free page is taken too.
        for size in [1 << 20, 4096, 1] {
            let chunk = vec![0xa5u8; size];
            loop {
                match file.write(&chunk) {
                    Ok(0) => break,
                    Ok(n) => written += n as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                    Err(e) => panic!("filling {}: {e}", self.dir.display()),
                }
            }
        }
        let _ = file.sync_all();
        written
    }

    /// Removes the filler file: the space is free again.
    pub fn free(&self) {
        std::fs::remove_file(self.dir.join(FILLER)).expect("removing the filler file");
    }

    /// Free bytes on the filesystem.
    pub fn available(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.dir)
            .output()
            .expect("running df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df's answer")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted = |args: &[&str]| {
            Command::new("umount")
                .args(args)
                .arg(&self.dir)
                .status()
                .is_ok_and(|s| s.success())
        };
        // Lazily if something still holds a file there: the mount goes once it is closed.
        if !unmounted(&[]) && !unmounted(&["-l"]) {
            eprintln!("could not unmount the tmpfs at {}", self.dir.display());
        }
    }
}
