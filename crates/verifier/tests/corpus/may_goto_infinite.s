# a may_goto whose jump comes back to itself: the taken path meets the state it left with the same may_goto depth, an infinite loop (the kernel's loop detector compares the depth; only the fall-through paths, one deeper each, are iterations of a bounded loop); jumping past itself instead is a plain loop exit
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r0, 2
self:
may_goto self
exit
--- good
mov %r0, 2
may_goto +0
exit
