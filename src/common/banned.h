/*
 * banned.h - calls that are easy to misuse; use the named replacement.
 * (git's banned.h: the compiler error points at the line that needs fixing.)
 */
#ifndef MR_BANNED_H
#define MR_BANNED_H

#define MR_BANNED(func) sorry_##func##_is_banned_see_banned_h

#undef strcpy
#define strcpy(x, y) MR_BANNED(strcpy)      /* use snprintf or mr_buf */
#undef strcat
#define strcat(x, y) MR_BANNED(strcat)      /* use mr_buf_append */
#undef sprintf
#define sprintf(...) MR_BANNED(sprintf)     /* use snprintf */
#undef vsprintf
#define vsprintf(...) MR_BANNED(vsprintf)   /* use vsnprintf */
#undef strtok
#define strtok(x, y) MR_BANNED(strtok)      /* use strtok_r or strsep */
#undef atoi
#define atoi(x) MR_BANNED(atoi)             /* use mr_parse_* in num.h */
#undef atol
#define atol(x) MR_BANNED(atol)
#undef gets
#define gets(x) MR_BANNED(gets)

#endif
