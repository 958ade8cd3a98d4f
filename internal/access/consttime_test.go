package access

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestConstantTimeCompare reads Authenticate's source: the digest of the
// key sent is compared with subtle.ConstantTimeCompare, against every
// configured digest (no return or break inside the loop), and never with
// ==, != or bytes.Equal, whose time depends on where the first byte differs.
func TestConstantTimeCompare(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "access.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "Authenticate" {
			fn = fd
		}
	}
	if fn == nil {
		t.Fatal("no func Authenticate in access.go")
	}
	var (
		constantTime bool
		loops        int
	)
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok {
					switch pkg.Name + "." + sel.Sel.Name {
					case "subtle.ConstantTimeCompare":
						constantTime = true
					case "bytes.Equal", "slices.Equal":
						t.Errorf("%s: %s.%s compares keys in variable time", fset.Position(n.Pos()), pkg.Name, sel.Sel.Name)
					}
				}
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				for _, side := range []ast.Expr{n.X, n.Y} {
					if mentionsDigest(side) {
						t.Errorf("%s: a digest compared with %s", fset.Position(n.Pos()), n.Op)
					}
				}
			}
		case *ast.RangeStmt:
			loops++
			ast.Inspect(n.Body, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.ReturnStmt:
					t.Errorf("%s: return inside the loop over keys: the time tells which key matched", fset.Position(m.Pos()))
				case *ast.BranchStmt:
					t.Errorf("%s: %s inside the loop over keys", fset.Position(m.Pos()), m.Tok)
				}
				return true
			})
		}
		return true
	})
	if !constantTime {
		t.Error("Authenticate does not call subtle.ConstantTimeCompare")
	}
	if loops != 1 {
		t.Errorf("Authenticate has %d range loops, want the one over the keys", loops)
	}
}

// mentionsDigest reports whether an expression names the digests, d (the
// key sent) or g.keys, other than as arguments of a call (such as
// subtle.ConstantTimeCompare, whose result may be compared).
func mentionsDigest(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			return false
		case *ast.Ident:
			found = found || n.Name == "d"
		case *ast.SelectorExpr:
			found = found || n.Sel.Name == "keys"
		}
		return !found
	})
	return found
}
