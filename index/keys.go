package index

// Every kind of record the index keeps is a key prefix, one byte, listed
// here and nowhere else. Integers in keys are big-endian so that keys sort
// by number; "0" is a zero byte that ends a string.
const (
	prefixVersion = 'v' // nothing -> FormatVersion, one byte
	prefixSeq     = 'q' // name -> badger sequence (inode numbers, staging ids, owner ids)

	prefixInode    = 'i' // ino -> Inode
	prefixDirent   = 'd' // parent ino, name -> child ino, mode, when the name was made
	prefixXattr    = 'x' // ino, name -> value
	prefixOrphan   = 'o' // ino -> nothing: unlinked while open
	prefixStaging  = 's' // staging id -> ino
	prefixManifest = 'm' // ino -> manifest.Manifest
	prefixChunk    = 'c' // chunk hash -> reference count
	prefixGarbage  = 'z' // chunk hash -> nothing: its count fell to zero

	prefixObject     = 'O' // object hash -> reference count: the manifests that are the object
	prefixTree       = 'T' // object hash -> its verification tree (cas.Tree)
	prefixQuarantine = 'Q' // object hash -> Quarantine as JSON: the scrub found it damaged

	prefixOwner        = 'w' // owner id -> encoded owner.Owner
	prefixIDByOwner    = 'W' // encoded owner.Owner -> owner id
	prefixJobRoot      = 'r' // job id, 0, ino -> nothing: an inode the job owns under one it does not
	prefixExecutorRoot = 'e' // resource id, 0, ino -> nothing: the same for an executor
	prefixJob          = 'J' // job id -> Job as JSON
	prefixExecutor     = 'E' // resource id -> Executor as JSON

	prefixAttic = 'a' // attic directory name -> ino
	prefixHold  = 'h' // hold id -> Hold as JSON
)
