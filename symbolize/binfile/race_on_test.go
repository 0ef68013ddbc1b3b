//go:build race

package binfile

// raceBuild: the race detector's runtime adds its own shadow memory to a
// child's RSS (about 250 MiB of the 288 MiB TestDWARFBomb measured under
// -race, with nothing inflated), so memory bounds allow for it.
const raceBuild = true
