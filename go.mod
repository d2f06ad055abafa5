module github.com/flxproto/felix

go 1.26
