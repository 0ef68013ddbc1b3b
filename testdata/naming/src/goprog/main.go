// goprog allocates through Go's runtime: a slice grown by append, a map,
// and one large buffer written once.
package main

import "fmt"

//go:noinline
func grow(n int) []int64 {
	var s []int64
	for i := 0; i < n; i++ {
		s = append(s, int64(i))
	}
	return s
}

//go:noinline
func index(n int) map[int]string {
	m := make(map[int]string)
	for i := 0; i < n; i++ {
		m[i] = fmt.Sprintf("value %08d", i)
	}
	return m
}

//go:noinline
func buffer(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 1
	}
	return b
}

func main() {
	s := grow(1 << 20)
	m := index(20000)
	b := buffer(8 << 20)
	fmt.Println(len(s), len(m), len(b))
}
