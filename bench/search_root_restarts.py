"""Issue 21: does TreeSearch's local search on d31 stop at 1.0673 only for want of other starts?

Forces each of the root's candidate cuts (the 8 best by own cost and the 8 best by ExGreedy's
score, plain and spread), solves both sides with the lookahead, then runs the bottom-up local
search from that tree; prints each start's price and where the local search took it.

    PYTHONPATH=. .venv/bin/python bench/search_root_restarts.py [d31]
"""
import sys
import time

import numpy as np

sys.path.insert(0,'bench')
from search_tables import load_set

import exclust.algorithms.search.tree_search as ts

X,k,centers=load_set(sys.argv[1] if len(sys.argv)>1 else "d31")
d2=((X[:,None,:]-centers[None])**2).sum(axis=2)
ref=float(d2.min(axis=1).sum())
rows=X.astype(float)
s=ts._Search(rows, None, 4, 2, guide=centers)
everything=np.ones(rows.shape[0],bool)
t0=time.time()
best=np.inf
results=[]
for spread in (False, True):
    s.spread=spread
    window = rows.shape[0]//(2*k) if spread else 0
    cands={(f,t) for _,f,t in s.best_cuts(everything, 8, window=window)}
    cands |= {(f,t) for _,f,t in s.best_cuts(everything, 8, s.all_members, window=window)}
    for f,t in sorted(cands):
        left,right=s.sides(everything,f,t)
        lm,rm=s.split_members(s.all_members,f,t)
        lc,lt=s.solve(left,lm,k-1,s.lookahead)
        rc,rt=s.solve(right,rm,k-1,s.lookahead)
        j=min(range(1,k), key=lambda j: lc[j]+rc[k-j])
        plan=(f,t,lt[j],j,rt[k-j])
        tree=s.nested(plan,everything)
        s.spread=True
        imp=s.improve(tree,everything)
        s.spread=spread
        c=s.cost(imp,everything)
        results.append((c/ref,spread,f,t))
        best=min(best,c)
        print(f"spread={spread} cut x{f}<={t:.3f} start {s.cost(tree,everything)/ref:.4f} improved {c/ref:.4f}  best "
              f"{best/ref:.4f}  {time.time()-t0:.0f}s", flush=True)
