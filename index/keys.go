package index

import (
	"encoding/binary"

	"github.com/statefs/statefs/cas"
)

// The keys of the index, each kind of record a one-byte prefix. Integers
// are big-endian so that keys sort by number; "0" is a zero byte that ends
// a string. The functions below are the only place a key is built or
// taken apart.
//
//	v                       -> FormatVersion, one byte                        versionKey
//	q name                  -> badger sequence (ino, staging, owner)          seqKey
//
//	i ino                   -> Inode                                          inoKey, keyIno
//	d parent-ino name       -> Dirent: child ino, mode, when the name was made inoNameKey, keyInoName
//	x ino name              -> an extended attribute's value                  inoNameKey, keyInoName
//	o ino                   -> nothing: unlinked while open                   inoKey, keyIno
//	s staging-id            -> ino                                            inoKey, keyIno
//	m ino                   -> manifest.Manifest                              inoKey, keyIno
//	c chunk-hash            -> reference count                                hashKey, keyHash
//	z chunk-hash            -> nothing: its count fell to zero                hashKey, keyHash
//
//	O object-hash           -> reference count: the manifests that are it     hashKey, keyHash
//	T object-hash           -> its verification tree (cas.Tree)               hashKey, keyHash
//	Q object-hash           -> Quarantine as JSON: the scrub found it damaged hashKey, keyHash
//
//	w owner-id              -> encoded owner.Owner                            inoKey, keyIno
//	W encoded-owner         -> owner id                                       idByOwnerKey, keyString
//	r job-id 0 ino          -> nothing: a job root (an inode the job owns under one it does not)
//	                                                                          rootKey, rootsPrefix, keyRoot
//	e resource-id 0 ino     -> nothing: the same for an executor              rootKey, rootsPrefix, keyRoot
//	J job-id                -> Job as JSON, times in ns (encodeJob, decodeJob) jobKey, keyString
//	E resource-id           -> Executor as JSON                               executorKey, keyString
//	C sequence              -> Collection as JSON, times in ns (storedCollection): the newest
//	                           MaxCollections removals of the collector       collectionKey, keyCollection
//
//	a attic-directory-name  -> ino                                            atticKey, keyString
//	h hold-id               -> Hold as JSON, At in ns (storedHold)            holdKey, keyString
//
//	R unique                -> Reply: when a kernel request committed, the inode it answered
//	                           (encodeReply); kept for ReplyKeep              replyKey, keyReply
//
// A scan of every key of one kind starts at kindPrefix.
const (
	prefixVersion = 'v'
	prefixSeq     = 'q'

	prefixInode    = 'i'
	prefixDirent   = 'd'
	prefixXattr    = 'x'
	prefixOrphan   = 'o'
	prefixStaging  = 's'
	prefixManifest = 'm'
	prefixChunk    = 'c'
	prefixGarbage  = 'z'

	prefixObject     = 'O'
	prefixTree       = 'T'
	prefixQuarantine = 'Q'

	prefixOwner        = 'w'
	prefixIDByOwner    = 'W'
	prefixJobRoot      = 'r'
	prefixExecutorRoot = 'e'
	prefixJob          = 'J'
	prefixExecutor     = 'E'
	prefixCollection   = 'C'

	prefixAttic = 'a'
	prefixHold  = 'h'

	prefixReply = 'R'
)

// kindPrefix is the prefix of every key of kind prefix.
func kindPrefix(prefix byte) []byte { return []byte{prefix} }

func versionKey() []byte { return []byte{prefixVersion} }

func seqKey(name string) []byte { return append([]byte{prefixSeq}, name...) }

// inoKey is a key of a number: an inode's, a staging id's or an owner id's.
// With prefixDirent or prefixXattr it is the prefix of a directory's
// entries or an inode's attributes.
func inoKey(prefix byte, ino uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], ino)
	return k
}

// keyIno is the number of an inoKey; false if k is not 9 bytes long.
func keyIno(k []byte) (uint64, bool) {
	if len(k) != 9 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// inoNameKey is a key of a number and a name: a directory entry's or an
// extended attribute's.
func inoNameKey(prefix byte, ino uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], ino)
	return append(k, name...)
}

// keyInoName takes an inoNameKey apart; false if k is shorter than an
// inoKey. The name may be empty.
func keyInoName(k []byte) (uint64, string, bool) {
	if len(k) < 9 {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), true
}

// hashKey is the key of a chunk or an object by its hash.
func hashKey(prefix byte, h []byte) []byte { return append([]byte{prefix}, h...) }

// keyHash is the hash of a hashKey; false if k is not of a hash's length.
func keyHash(k []byte) (cas.Hash, bool) {
	var h cas.Hash
	if len(k) != 1+len(h) {
		return h, false
	}
	copy(h[:], k[1:])
	return h, true
}

func idByOwnerKey(encoded []byte) []byte { return append([]byte{prefixIDByOwner}, encoded...) }

func jobKey(id string) []byte { return append([]byte{prefixJob}, id...) }

func executorKey(id string) []byte { return append([]byte{prefixExecutor}, id...) }

// collectionKey is the key of the collection record numbered seq: records
// sort oldest first.
func collectionKey(seq uint64) []byte { return inoKey(prefixCollection, seq) }

// keyCollection is the number of a collectionKey; false if k is not one.
func keyCollection(k []byte) (uint64, bool) { return keyIno(k) }

// replyKey is the key of the reply record of the kernel's request unique:
// records sort by the order the kernel sent their requests in.
func replyKey(unique uint64) []byte { return inoKey(prefixReply, unique) }

// keyReply is the unique id of a replyKey; false if k is not one.
func keyReply(k []byte) (uint64, bool) { return keyIno(k) }

func atticKey(name string) []byte { return append([]byte{prefixAttic}, name...) }

func holdKey(id string) []byte { return append([]byte{prefixHold}, id...) }

// keyString is what follows the prefix of a key of a string: a sequence's
// name, an encoded owner, a job, executor or hold id, an attic directory's
// name.
func keyString(k []byte) string { return string(k[1:]) }

// rootKey is the key of inode ino as a root of job or executor id (prefix
// prefixJobRoot or prefixExecutorRoot).
func rootKey(prefix byte, id string, ino uint64) []byte {
	return binary.BigEndian.AppendUint64(rootsPrefix(prefix, id), ino)
}

// rootsPrefix is the prefix of the root keys of one job or executor.
func rootsPrefix(prefix byte, id string) []byte {
	return append(append([]byte{prefix}, id...), 0)
}

func jobRootKey(job string, ino uint64) []byte { return rootKey(prefixJobRoot, job, ino) }

// keyRoot takes a rootKey apart; false if it has no zero byte before its
// ino.
func keyRoot(k []byte) (id string, ino uint64, ok bool) {
	if len(k) < 10 || k[len(k)-9] != 0 {
		return "", 0, false
	}
	return string(k[1 : len(k)-9]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}
