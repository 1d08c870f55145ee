package owner

import "strings"

// FlinkRules returns the built-in rule set for Flink's layout, as Flink names
// things (LocalRecoveryDirectoryProviderImpl, the TaskManager working
// directory of FLIP-198, EmbeddedRocksDBStateBackend's instance directories):
//
//	tm_<resource-id>                                       executor
//	tm_<rid>/localState/aid_<allocation>                   allocation
//	  .../jid_<job>                                        job-in-allocation
//	  .../vtx_<vertex>_sti_<subtask>                       subtask
//	  .../chk_<checkpoint>, and everything below it        checkpoint
//	tm_<rid>/tmp/job_<job>_op_<operator>_uuid_<uuid>       job (a live RocksDB, or
//	                                                       Flink 2's synchronous ForSt)
//	tm_<rid>/tmp/<job>                                     job (Flink 2's asynchronous
//	                                                       ForSt: op_<operator>_attempt_<n>/
//	                                                       below it, each with its db/)
//	localState_<rid>/aid_<allocation>/...                  as under localState
//	                                                       (taskmanager.state.local.root-dirs)
//
// Everything else in tm_<rid>/ (blobStorage, slotAllocationSnapshots, the rest
// of tmp, ForSt's file cache tmp/cache, which holds copies of any job's SSTs)
// is executor level; everything else at the root is unowned. Ids must
// have Flink's exact syntax: a resource id is [A-Za-z0-9._-]{1,255} but not
// "." or ".."; job, allocation and vertex ids are 32 lower-case hex digits;
// the subtask index (up to 10 digits) and checkpoint id (up to 19) are
// decimal without leading zeros, as Java prints an int and a long; the uuid is
// java.util.UUID's form. A component that does not fit adds nothing: the path
// stays at the level its parent reached. flink.rules states the same in the
// rules-file format.
//
// Each of these trees may also sit one level down, in volumes/<volume>/: the
// CSI plugin gives each pod the tree of one volume (a name of
// [A-Za-z0-9._-]{1,253} not starting with '.'), and the pod's executor
// writes its working directory there.
func FlinkRules() *Rules { return flinkRules }

// isVolumeName reports whether name has the syntax of a CSI volume's name.
func isVolumeName(name string) bool {
	if name == "" || len(name) > 253 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

var flinkRules = &Rules{flink: true}

// flinkOwner is FlinkRules' Owner. Its results are substrings of path, so it
// allocates nothing.
func flinkOwner(path string) Owner {
	var o Owner
	root, rest, more := strings.Cut(path, "/")
	if root == "volumes" && more {
		// A CSI volume's tree: volumes/<volume>/ holds a working directory.
		if volume, inside, ok := strings.Cut(rest, "/"); ok && isVolumeName(volume) {
			root, rest, more = strings.Cut(inside, "/")
		}
	}
	if rid, ok := strings.CutPrefix(root, "localState_"); ok && IsResourceID(rid) {
		o.Executor, o.Level = rid, LevelExecutor
		if more {
			flinkLocalState(&o, rest)
		}
		return o
	}
	rid, ok := strings.CutPrefix(root, "tm_")
	if !ok || !IsResourceID(rid) {
		return o
	}
	o.Executor, o.Level = rid, LevelExecutor
	if !more {
		return o
	}
	dir, rest, more := strings.Cut(rest, "/")
	switch {
	case dir == "localState" && more:
		flinkLocalState(&o, rest)
	case dir == "tmp" && more:
		instance, _, _ := strings.Cut(rest, "/")
		if job, ok := rocksDBInstanceJob(instance); ok {
			o.Job, o.Level = job, LevelJob
		} else if IsFlinkID(instance) { // ForSt's per-job directory
			o.Job, o.Level = instance, LevelJob
		}
	}
	return o
}

// flinkLocalState fills o from path below a local-state root:
// aid_<a>/jid_<j>/vtx_<v>_sti_<n>/chk_<c>/...
func flinkLocalState(o *Owner, path string) {
	name, path, more := strings.Cut(path, "/")
	aid, ok := strings.CutPrefix(name, "aid_")
	if !ok || !IsFlinkID(aid) {
		return
	}
	o.Allocation, o.Level = aid, LevelAllocation
	if !more {
		return
	}
	name, path, more = strings.Cut(path, "/")
	jid, ok := strings.CutPrefix(name, "jid_")
	if !ok || !IsFlinkID(jid) {
		return
	}
	o.Job, o.Level = jid, LevelJobInAllocation
	if !more {
		return
	}
	name, path, more = strings.Cut(path, "/")
	vertex, subtask, ok := subtaskDir(name)
	if !ok {
		return
	}
	o.Vertex, o.Subtask, o.Level = vertex, subtask, LevelSubtask
	if !more {
		return
	}
	name, _, _ = strings.Cut(path, "/")
	chk, ok := strings.CutPrefix(name, "chk_")
	if !ok || !isDecimal(chk, 19) {
		return
	}
	o.Checkpoint, o.Level = chk, LevelCheckpoint
}

// subtaskDir parses vtx_<vertex>_sti_<subtask index>.
func subtaskDir(name string) (vertex, subtask string, ok bool) {
	const vtx, sti = "vtx_", "_sti_"
	const idEnd = len(vtx) + flinkIDLen
	if len(name) <= idEnd+len(sti) || name[:len(vtx)] != vtx || name[idEnd:idEnd+len(sti)] != sti {
		return "", "", false
	}
	vertex, subtask = name[len(vtx):idEnd], name[idEnd+len(sti):]
	return vertex, subtask, IsFlinkID(vertex) && isDecimal(subtask, 10)
}

// rocksDBInstanceJob parses job_<job>_op_<operator>_uuid_<uuid>, where the
// operator is Flink's operator identifier with every character outside
// [A-Za-z0-9-] replaced by '_' (so it may itself contain "_uuid_").
func rocksDBInstanceJob(name string) (job string, ok bool) {
	const prefix, op, uuid = "job_", "_op_", "_uuid_"
	const jobEnd = len(prefix) + flinkIDLen
	const suffix = len(uuid) + uuidLen
	if len(name) <= jobEnd+len(op)+suffix || name[:len(prefix)] != prefix ||
		name[jobEnd:jobEnd+len(op)] != op || name[len(name)-suffix:len(name)-uuidLen] != uuid {
		return "", false
	}
	job = name[len(prefix):jobEnd]
	for _, c := range []byte(name[jobEnd+len(op) : len(name)-suffix]) {
		if !isAlnum(c) && c != '_' && c != '-' {
			return "", false
		}
	}
	return job, IsFlinkID(job) && isUUID(name[len(name)-uuidLen:])
}

const (
	flinkIDLen    = 32  // AbstractID.toString(): 16 bytes in hex
	uuidLen       = 36  // java.util.UUID.toString()
	maxResourceID = 255 // a path component's limit
)

// IsResourceID reports whether s is a resource id as statefs accepts it:
// [A-Za-z0-9._-]{1,255}, but neither "." nor "..", which name no directory.
// The collector's oracles refuse any other executor id, as they refuse any
// job id IsFlinkID does not accept.
func IsResourceID(s string) bool {
	if len(s) == 0 || len(s) > maxResourceID || s == "." || s == ".." {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// IsFlinkID reports whether s is an AbstractID (JobID, AllocationID,
// JobVertexID) as Flink prints it: 32 lower-case hex digits. A path
// component whose id is anything else owns nothing, and the collector's
// oracles refuse any other job id, so no id can build a URL path or a file
// name outside its directory ("../x", "a/b", "%2e%2e").
func IsFlinkID(s string) bool {
	return len(s) == flinkIDLen && isLowerHex(s)
}

// isUUID reports whether s is a java.util.UUID as it prints itself.
func isUUID(s string) bool {
	return len(s) == uuidLen && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' &&
		isLowerHex(s[:8]) && isLowerHex(s[9:13]) && isLowerHex(s[14:18]) && isLowerHex(s[19:23]) && isLowerHex(s[24:])
}

// isDecimal reports whether s is a non-negative number of at most maxDigits
// digits as Java prints it: no sign, no leading zero.
func isDecimal(s string, maxDigits int) bool {
	if len(s) == 0 || len(s) > maxDigits || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
