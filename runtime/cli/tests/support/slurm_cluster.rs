//! A real Slurm cluster on this host for the tests: `munged`, `slurmctld` and two `slurmd` nodes
//! (`n1`, `n2`, one CPU each, a fake GPU each through `gres.conf`) on loopback ports, all in a
//! temporary directory, started by [`SlurmCluster::start`] and stopped (jobs cancelled first) when
//! it is dropped. Debian's `slurm-wlm` and `munge` provide the daemons; `cargo xtask setup` installs
//! them. Client commands (`sbatch`, `squeue`, `scancel`) find the cluster through `SLURM_CONF`:
//! pass [`SlurmCluster::env`] to every command that talks to it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemons this fixture needs.
const DAEMONS: [&str; 3] = [
    "/usr/sbin/munged",
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
];

/// A running cluster.
pub struct SlurmCluster {
    dir: tempfile::TempDir,
    munged: Child,
    slurmctld: Child,
    slurmd: Vec<(String, Child)>,
}

/// Whether the daemons are installed; when they are not, the test says so loudly and skips.
pub fn available() -> bool {
    let missing: Vec<&str> = DAEMONS
        .iter()
        .copied()
        .filter(|path| !Path::new(path).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    easeml_test_support::missing_part(
        "the Slurm test",
        "the Slurm and munge daemons",
        &format!("{} missing", missing.join(", ")),
        "`cargo xtask setup` installs them (apt-get install slurm-wlm munge)",
    );
    false
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

fn host_name() -> String {
    let output = Command::new("hostname").output().expect("hostname runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl SlurmCluster {
    /// Starts munge, the controller and both nodes, and waits until both nodes are idle.
    pub fn start() -> SlurmCluster {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().to_path_buf();
        for sub in ["munge", "state", "log", "spool-n1", "spool-n2"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        let mut key = vec![0u8; 1024];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut key))
            .expect("random bytes for munge's key");
        let key_file = root.join("munge/munge.key");
        std::fs::write(&key_file, key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(root.join("munge"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        let socket = root.join("munge/socket");
        let munged = Command::new("/usr/sbin/munged")
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key_file.display()))
            .arg(format!(
                "--log-file={}",
                root.join("log/munged.log").display()
            ))
            .arg(format!("--pid-file={}", root.join("munge/pid").display()))
            .arg(format!("--seed-file={}", root.join("munge/seed").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("munged starts");
        wait_for("munge's socket", Duration::from_secs(10), || {
            socket.exists()
        });

        let host = host_name();
        let r = root.display();
        let conf = format!(
            "ClusterName=easeml-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool-%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
GresTypes=gpu
NodeName=n1 NodeHostname={host} NodeAddr=127.0.0.1 Port={n1} CPUs=1 RealMemory=500 Gres=gpu:1 State=UNKNOWN
NodeName=n2 NodeHostname={host} NodeAddr=127.0.0.1 Port={n2} CPUs=1 RealMemory=500 Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
",
            ctld = free_port(),
            slurmd = free_port(),
            socket = socket.display(),
            n1 = free_port(),
            n2 = free_port(),
        );
        std::fs::write(root.join("slurm.conf"), conf).unwrap();
        // Fake GPUs: Slurm only needs a device file per GPU to hand out.
        std::fs::write(
            root.join("gres.conf"),
            "NodeName=n1 Name=gpu File=/dev/null\nNodeName=n2 Name=gpu File=/dev/zero\n",
        )
        .unwrap();

        let conf = root.join("slurm.conf");
        let daemon = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .env("SLURM_CONF", &conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| panic!("{program} starts: {error}"))
        };
        // -i: ignore any state (a fresh cluster).
        let slurmctld = daemon("/usr/sbin/slurmctld", &["-D", "-i"]);
        let mut cluster = SlurmCluster {
            dir,
            munged,
            slurmctld,
            slurmd: Vec::new(),
        };
        for node in ["n1", "n2"] {
            let child = daemon("/usr/sbin/slurmd", &["-D", "-N", node]);
            cluster.slurmd.push((node.to_owned(), child));
        }
        let started = Instant::now();
        loop {
            let idle = cluster
                .command("sinfo")
                .args(["-h", "-o", "%T %D"])
                .output();
            if let Ok(output) = idle
                && String::from_utf8_lossy(&output.stdout).trim() == "idle 2"
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the Slurm nodes did not come up within a minute; logs in {}:\n{}",
                cluster.root().display(),
                cluster.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    /// The cluster's directory (configuration, logs, state).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The environment a client command needs: `SLURM_CONF`.
    pub fn env(&self) -> (&'static str, PathBuf) {
        ("SLURM_CONF", self.root().join("slurm.conf"))
    }

    /// A Slurm client command (`squeue`, `scancel`, ...) aimed at this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        let (key, value) = self.env();
        command.env(key, value);
        command
    }

    /// The node a job (`<job>_<task>` or `<job>`) runs on, when it runs.
    pub fn node_of(&self, job: &str) -> Option<String> {
        let output = self
            .command("squeue")
            .args(["-h", "-o", "%i %T %N"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .find_map(|line| {
                let mut fields = line.split_whitespace();
                let (id, state, node) = (fields.next()?, fields.next()?, fields.next()?);
                (id == job && state == "RUNNING").then(|| node.to_owned())
            })
    }

    /// Kills a node's `slurmd` with SIGKILL (its running job steps go on, orphaned).
    pub fn kill_slurmd(&mut self, node: &str) {
        let (_, child) = self
            .slurmd
            .iter_mut()
            .find(|(name, _)| name == node)
            .unwrap_or_else(|| panic!("no node {node}"));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// The daemons' logs, for a failure message.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for name in [
            "slurmctld.log",
            "slurmd-n1.log",
            "slurmd-n2.log",
            "munged.log",
        ] {
            let log =
                std::fs::read_to_string(self.root().join("log").join(name)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            text.push_str(&format!("--- {name}\n"));
            for line in tail.into_iter().rev() {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        // Jobs first (their workers get TERM and give their units back), then the daemons.
        let _ = self
            .command("scancel")
            .arg("--user=root")
            .stderr(Stdio::null())
            .status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            let queue = self.command("squeue").args(["-h"]).output();
            match queue {
                Ok(output) if output.status.success() && !output.stdout.is_empty() => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                _ => break,
            }
        }
        for (_, child) in &mut self.slurmd {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self.slurmctld.kill();
        let _ = self.slurmctld.wait();
        let _ = self.munged.kill();
        let _ = self.munged.wait();
    }
}
