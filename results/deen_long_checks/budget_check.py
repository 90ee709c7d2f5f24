import gzip, json, sys
from nmt.bootstrap import study_table, format_markdown
from nmt.longsets import long_sentence_set
src=[l.strip() for l in gzip.open('../shared/data/multi30k/test_2016_flickr.de.gz','rt')]
ref=[l.strip() for l in gzip.open('../shared/data/multi30k/test_2016_flickr.en.gz','rt')]
j=long_sentence_set(src,ref,(1,2,3,4,5))
keep=[i for i,s in enumerate(j.sources) if len(s.split())<=10 or 51<=len(s.split())<=60]
S=[j.sources[i] for i in keep]; R=[j.references[i] for i in keep]
h913=open('runs/deen_long_additive/hyps/test_2016_flickr_joined.txt').read().split('\n')
n913=open('runs/deen_long_none/hyps/test_2016_flickr_joined.txt').read().split('\n')
systems={"none (913 steps)":[n913[i] for i in keep], "additive (913 steps)":[h913[i] for i in keep],
         "additive (1,200 steps)":[" ".join(x.split()) for x in open('/tmp/j2x.hyp').read().split('\n')[:len(keep)]]}
rows=study_table(systems, R, S, ((1,10),(51,60)), baseline="none (913 steps)", n_samples=1000, seed=12345)
print(format_markdown(rows))
