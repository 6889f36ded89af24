/* placeholder: being written */
typedef int trsim_placeholder_rt_errors;
