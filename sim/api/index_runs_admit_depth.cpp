// The radix index with the admit_depth rule over every online leaf order (index_runs_radix.ipp).
#include "api/index_runs_radix.ipp"

template struct kvtk::sim::index_runs::radix_with<kvtk::prefix::admit_depth>;
