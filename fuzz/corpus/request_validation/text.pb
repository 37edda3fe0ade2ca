
What is a cache?PZ

Šfp16